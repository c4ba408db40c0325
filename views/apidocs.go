package views

// APIDocsView is the API reference page, built from openapi.json.
type APIDocsView struct {
	Page
	Heading, Version string
	Intro            []Prose
	// Errors are the error answers operations share, with examples.
	Errors   []APIResponse
	Sections []APISection
}

// APISection is the operations of one tag, such as Events.
type APISection struct {
	ID, Name   string
	About      []Prose
	Operations []APIOperation
}

// APIOperation is one method and path.
type APIOperation struct {
	// ID is the operationId, used as the anchor.
	ID, Method, Path, Summary string
	About                     []Prose
	// Public is set when the operation needs no API key.
	Public    bool
	Params    []APIField
	Body      *APIBody
	Responses []APIResponse
}

// APIField is a parameter or a field of a request body; a nested field
// is named by its path ("actor.name", "recipients[].email").
type APIField struct {
	Name, In, Type string
	Required       bool
	About          []Prose
}

// APIBody is a request body: its fields and examples.
type APIBody struct {
	Required bool
	Fields   []APIField
	Examples []APIExample
}

// APIResponse is one status an operation may answer with.
type APIResponse struct {
	Status, ContentType string
	About               []Prose
	Examples            []APIExample
}

// APIExample is an example body, ready to show.
type APIExample struct {
	Title, Body string
}

// Prose is a run of a description: plain text, or code when Code is set
// (a `quoted` part of the description).
type Prose struct {
	Text string
	Code bool
}
