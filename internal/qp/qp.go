// Package qp writes quoted-printable exactly as mime/quotedprintable's
// Writer does (text mode: line breaks stay line breaks), into a byte
// slice. Rendering measures an email's HTML as sent and sending encodes
// it; the standard Writer, a byte at a time through an io.Writer per
// line, was a tenth of the CPU a digest costs.
package qp

import "sync"

const lineMaxLen = 76

const upperhex = "0123456789ABCDEF"

// plain marks the bytes written as they are: printable ASCII but '=',
// space and tab.
var plain = func() (t [256]bool) {
	for b := '!'; b <= '~'; b++ {
		t[b] = b != '='
	}
	t[' '], t['\t'] = true, true
	return t
}()

// Append appends the quoted-printable encoding of src to dst, as
// quotedprintable.NewWriter writes src in one or more Writes and a Close:
// lines of at most 76 characters with soft breaks ("=\r\n"), CRLF line
// ends, and a space or tab before a line end encoded.
func Append(dst, src []byte) []byte {
	e := encoder{out: dst, start: len(dst)}
	for i := 0; i < len(src); {
		b := src[i]
		switch {
		case plain[b]:
			j := i + 1
			for j < len(src) && plain[src[j]] {
				j++
			}
			e.plain(src[i:j])
			i = j
			continue
		case b == '\n' || b == '\r':
			// If the previous byte was \r, the CRLF is already written.
			if e.cr && b == '\n' {
				e.cr = false
			} else {
				e.cr = b == '\r'
				e.encodeLastSpace()
				e.endLine()
			}
		default:
			// Like the standard Writer, leaving the CR state alone.
			e.encode(b)
		}
		i++
	}
	e.encodeLastSpace()
	return e.out
}

var scratch = sync.Pool{New: func() any { return new([]byte) }}

// Len is the length of src in quoted-printable: len(Append(nil, src)).
func Len(src []byte) int {
	buf := scratch.Get().(*[]byte)
	*buf = Append((*buf)[:0], src)
	n := len(*buf)
	scratch.Put(buf)
	return n
}

// encoder holds the line being written: out[start:] is the current line,
// as the standard Writer's line buffer is.
type encoder struct {
	out   []byte
	start int
	cr    bool
}

// endLine ends the current line with CRLF.
func (e *encoder) endLine() {
	e.out = append(e.out, '\r', '\n')
	e.start = len(e.out)
}

// plain writes a run of bytes as they are, with soft line breaks where
// a line is full: the standard Writer breaks before a byte that would be
// a line's 76th.
func (e *encoder) plain(run []byte) {
	for len(run) > 0 {
		room := lineMaxLen - 1 - (len(e.out) - e.start)
		if room <= 0 {
			e.out = append(e.out, '=')
			e.endLine()
			continue
		}
		n := min(room, len(run))
		e.out = append(e.out, run[:n]...)
		run = run[n:]
	}
	e.cr = false
}

// encode writes b as =XX.
func (e *encoder) encode(b byte) {
	if lineMaxLen-1-(len(e.out)-e.start) < 3 {
		e.out = append(e.out, '=')
		e.endLine()
	}
	e.out = append(e.out, '=', upperhex[b>>4], upperhex[b&0x0f])
}

// encodeLastSpace encodes the line's last byte if it is a space or a
// tab, which a line end must not follow.
func (e *encoder) encodeLastSpace() {
	if len(e.out) == e.start {
		return
	}
	b := e.out[len(e.out)-1]
	if b != ' ' && b != '\t' {
		return
	}
	e.out = e.out[:len(e.out)-1]
	e.encode(b)
}
