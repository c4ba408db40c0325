package preferences

// FieldError names one invalid field of a request, by its path in what
// was checked ("recipients[2].email", "types.comment.window"). The engine
// and the simulator both report problems as these; the API turns them
// into its problem+json field list in one place (web/problem.go).
type FieldError struct {
	Field   string
	Message string
}
