package mail_test

import (
	"bufio"
	"bytes"
	"flag"
	"io"
	"math/rand/v2"
	"net/textproto"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mailtemplates"
)

var update = flag.Bool("update", false, "rewrite testdata/*.eml from the current code")

// digestMessage is a daily digest of three types as lull renders one:
// the shape of most of a flush wave's emails, with non-ASCII text so
// quoted-printable has work to do.
func digestMessage(tb testing.TB) *mailtemplates.Message {
	tb.Helper()
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	types := []mailtemplates.Type{
		{Key: "comment.created", Name: "Comments", Category: "Documents", DisplayLimit: 5,
			ItemText: "{{actor.name}} on {{object.title}}: {{data.excerpt}}", GroupText: "{{actors}} commented on {{object.title}}"},
		{Key: "document.shared", Name: "Shared documents — équipe", Category: "Documents"},
		{Key: "build.failed", Name: "Failed builds", Category: "CI", ItemText: "{{object.title}} {{data.status}}: {{data.error}}"},
	}
	var groups []mailtemplates.Group
	for i, t := range types {
		groups = append(groups, mailtemplates.Sample(t, 3+i*6, now))
	}
	m, err := mailtemplates.Render(mailtemplates.Input{
		BatchID: 42, Mode: "daily",
		Recipient: mailtemplates.Recipient{ID: "u_zoe", Name: "Zoë Stone", Email: "zoe@example.com", Location: time.UTC},
		Since:     now.Add(-23 * time.Hour), Groups: groups,
		From: "Acme <notify@example.com>", MessageID: "batch-42@example.com", Date: now,
		ThreadID: "thread-7@example.com", ListID: "Comments <comments.example.com>",
		SettingsURL:    "https://lull.example/settings/enter?token=s",
		UnsubscribeURL: "https://lull.example/unsubscribe?token=u",
	})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// boundary finds go-mail's random MIME boundary, which differs each
// time a message is written.
var boundary = regexp.MustCompile(`boundary=([0-9a-f]+)`)

// canonical writes the message's boundary as BOUNDARY and sorts its
// header fields: go-mail writes both differently each time (the
// boundary is random, the headers come from a map), and a receiver
// reads neither.
func canonical(b []byte) []byte {
	if m := boundary.FindSubmatch(b); m != nil {
		b = bytes.ReplaceAll(b, m[1], []byte("BOUNDARY"))
	}
	head, body, _ := bytes.Cut(b, []byte("\r\n\r\n"))
	var fields []string
	for _, line := range strings.SplitAfter(string(head)+"\r\n", "\r\n") {
		switch {
		case line == "":
		case (line[0] == ' ' || line[0] == '\t') && len(fields) > 0:
			fields[len(fields)-1] += line // a folded line continues its field
		default:
			fields = append(fields, line)
		}
	}
	slices.Sort(fields)
	return append([]byte(strings.Join(fields, "")+"\r\n"), body...)
}

// TestWrittenBytesStayTheSame compares the email as SMTP receives it,
// byte for byte (the random boundary aside), with one written before
// the writing path was made faster: a faster path must not change a
// byte.
func TestWrittenBytesStayTheSame(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  *mailtemplates.Message
	}{
		{"digest", digestMessage(t)},
		{"short", message("Fatima 🎉 shared «Q3 plan»")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := mail.WriteMessage(&buf, tc.msg, mail.Envelope{FeedbackID: "notifications:acme"}); err != nil {
				t.Fatal(err)
			}
			got := canonical(buf.Bytes())
			file := "testdata/" + tc.name + ".eml"
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				t.Errorf("the email as written differs from %s at byte %d: %q", file, i, got[i:min(len(got), i+200)])
			}
		})
	}
}

// BenchmarkWriteDigest is what sending costs lull per email besides the
// network: building the message and writing it through SMTP's DATA
// encoding (dot-stuffing), as Send does.
func BenchmarkWriteDigest(b *testing.B) {
	m := digestMessage(b)
	bw := bufio.NewWriter(io.Discard)
	b.ReportAllocs()
	for b.Loop() {
		data, err := mail.Encode(m, mail.Envelope{})
		if err != nil {
			b.Fatal(err)
		}
		dw := textproto.NewWriter(bw).DotWriter()
		if err := mail.WriteData(bw, dw, data); err != nil {
			b.Fatal(err)
		}
		dw.Close()
	}
}

// TestDataAsDotWriterWritesIt compares writeData with net/textproto's
// DotWriter on lines that start with dots, bare CR and LF, and no line
// end at all.
func TestDataAsDotWriterWritesIt(t *testing.T) {
	digest, err := mail.Encode(digestMessage(t), mail.Envelope{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []string{string(digest), ".\r\n", "a\r\n.b\r\n..\r\n", "a\nb\r\n", "a\rb\r\n", "a\r\n\r\n", "a", "\r\n", "a\r\r\n.x\r\n"}
	alphabet := []byte(".\r\na")
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b)+"\r\n")
	}
	for _, c := range cases {
		var want, got bytes.Buffer
		wbw := bufio.NewWriter(&want)
		dw := textproto.NewWriter(wbw).DotWriter()
		dw.Write([]byte(c))
		dw.Close()
		gbw := bufio.NewWriter(&got)
		dw = textproto.NewWriter(gbw).DotWriter()
		if err := mail.WriteData(gbw, dw, []byte(c)); err != nil {
			t.Fatal(err)
		}
		dw.Close()
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%q written as %q, DotWriter writes %q", c, got.Bytes(), want.Bytes())
		}
	}
}
