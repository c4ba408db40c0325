package qp

import (
	"bytes"
	"math/rand/v2"
	"mime/quotedprintable"
	"testing"
)

// standard is what mime/quotedprintable writes for src, in writes of
// the given sizes (go-mail writes a body in one).
func standard(src []byte, chunk int) []byte {
	var buf bytes.Buffer
	w := quotedprintable.NewWriter(&buf)
	for len(src) > 0 {
		n := min(chunk, len(src))
		w.Write(src[:n])
		src = src[n:]
	}
	w.Close()
	return buf.Bytes()
}

func check(t *testing.T, src []byte) {
	t.Helper()
	want := standard(src, len(src)+1)
	if got := Append([]byte("prefix"), src); !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" {
		t.Fatalf("Append(%q)\n got %q\nwant %q", src, got[6:], want)
	}
	if got := Len(src); got != len(want) {
		t.Fatalf("Len(%q) = %d, want %d", src, got, len(want))
	}
	if chunked := standard(src, 7); !bytes.Equal(chunked, want) {
		t.Fatalf("the standard writer depends on its writes' sizes for %q", src)
	}
}

// TestSameAsTheStandardWriter compares with mime/quotedprintable on the
// cases where its rules meet: spaces before line ends and soft breaks,
// bare CR and LF, encoded bytes at the end of a line, long lines.
func TestSameAsTheStandardWriter(t *testing.T) {
	for _, s := range []string{
		"", "a", " ", "\t", "a \r\nb", "a \nb", "a\rb", "a\r\rb", "a\n\rb", "a \t", "=", "é",
		"x =\r\n", string(bytes.Repeat([]byte("a"), 75)) + " ", string(bytes.Repeat([]byte("a"), 74)) + "é",
		string(bytes.Repeat([]byte("a"), 76)), string(bytes.Repeat([]byte("a "), 80)),
		string(bytes.Repeat([]byte("a"), 74)) + " \n", string(bytes.Repeat([]byte("a"), 75)) + "\t\r\n",
		"<p>Grüße — «Q3 plan»</p>\n", "\x00\x7f\xff.\r\n.\r\n",
	} {
		check(t, []byte(s))
	}
	alphabet := []byte(" \t\r\n=a.~\x00\xc3\xa9<")
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		src := make([]byte, r.IntN(300))
		for i := range src {
			src[i] = alphabet[r.IntN(len(alphabet))]
		}
		check(t, src)
	}
}

func FuzzSameAsTheStandardWriter(f *testing.F) {
	f.Add([]byte("a \r\nb\té=\n"))
	f.Fuzz(func(t *testing.T, src []byte) { check(t, src) })
}

func BenchmarkAppend(b *testing.B) {
	src := bytes.Repeat([]byte("<td style=\"padding:10px 0\">Grüße — «Q3 plan»</td>\n"), 500)
	var dst []byte
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		dst = Append(dst[:0], src)
	}
}

func BenchmarkStandard(b *testing.B) {
	src := bytes.Repeat([]byte("<td style=\"padding:10px 0\">Grüße — «Q3 plan»</td>\n"), 500)
	var buf bytes.Buffer
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		buf.Reset()
		w := quotedprintable.NewWriter(&buf)
		w.Write(src)
		w.Close()
	}
}
