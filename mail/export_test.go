package mail

import "github.com/lull-dev/lull/mailtemplates"

// Encode is what Send writes after DATA, for tests and benchmarks.
func Encode(m *mailtemplates.Message, env Envelope) ([]byte, error) {
	_, data, err := encode(m, env)
	return data, err
}

var WriteData = writeData
