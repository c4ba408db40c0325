package mail

import (
	"bufio"
	"bytes"
	"io"
)

// writeData writes an email after DATA's 354: to dot, the DATA writer
// (net/textproto's DotWriter, which doubles a dot that starts a line and
// turns a bare LF into CRLF, a byte at a time), or, when the email's
// lines all end in CRLF as encode writes them, dot-stuffed here in whole
// lines straight to bw, the connection's buffer under dot. The last CRLF
// still goes through dot, which then stands at the start of a line, as
// it would have had it written everything, so its Close ends the data
// with the same "." line. Byte-wise stuffing was a third of what writing
// an email cost lull.
func writeData(bw *bufio.Writer, dot io.Writer, data []byte) error {
	stuffed, ok := dotStuffed(data)
	if !ok {
		_, err := dot.Write(data)
		return err
	}
	if _, err := bw.Write(stuffed[:len(stuffed)-2]); err != nil {
		return err
	}
	_, err := dot.Write(crlf)
	return err
}

var crlf = []byte("\r\n")

// dotStuffed is data with a dot added before every line that starts with
// one, what a DotWriter writes for data whose every line ends in CRLF;
// it reports false for other data (a bare CR or LF, no CRLF at the end).
func dotStuffed(data []byte) ([]byte, bool) {
	if !bytes.HasSuffix(data, crlf) {
		return nil, false
	}
	out := make([]byte, 0, len(data)+len(data)/64)
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 1 || data[i-1] != '\r' || bytes.IndexByte(data[:i-1], '\r') >= 0 {
			return nil, false
		}
		if data[0] == '.' {
			out = append(out, '.')
		}
		out = append(out, data[:i+1]...)
		data = data[i+1:]
	}
	return out, true
}
