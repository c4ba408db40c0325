package web

// Patterns lists every pattern the router registers, for the test that
// holds the API document to them.
func (s *Server) Patterns() []string { return s.routes().patterns }
