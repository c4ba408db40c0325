package mail_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/lull-dev/lull/bounce"
	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mail/smtptest"
	"github.com/lull-dev/lull/mailtemplates"
)

// TestDKIMSignsEverySentEmail sends assorted emails through a real SMTP
// conversation and checks each one as a receiver would: go-msgauth's
// verifier passes it against the published key, with both RFC 8058
// headers and the Feedback-ID among the signed ones, and the envelope
// sender is the batch's signed return path.
func TestDKIMSignsEverySentEmail(t *testing.T) {
	t.Parallel()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(edKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})
	edPath := filepath.Join(t.TempDir(), "dkim.pem")
	if err := os.WriteFile(edPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600); err != nil {
		t.Fatal(err)
	}
	rsaPub, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	records := map[string]string{
		"rsa._domainkey.example.com": "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(rsaPub),
		"ed._domainkey.example.com":  "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(edKey.Public().(ed25519.PublicKey)),
	}
	verp := bounce.VERP{Domain: "bounces.example.com", Secret: []byte("0123456789abcdef0123456789abcdef")}

	for _, c := range []struct{ name, key, selector string }{
		{"RSAFromPEMText", string(rsaPEM), "rsa"},
		{"Ed25519FromFile", edPath, "ed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, err := mail.NewDKIM(c.key, c.selector, "example.com")
			if err != nil {
				t.Fatal(err)
			}
			srv := smtptest.Start(t)
			s := newSMTP(t, mail.SMTPConfig{URL: srv.URL(), Envelope: mail.Envelope{
				DKIM: d, ReturnPath: verp.Address, FeedbackID: mail.FeedbackID("example.com"),
			}})
			msgs := signedSamples()
			for _, m := range msgs {
				if err := s.Send(t.Context(), m); err != nil {
					t.Fatal(err)
				}
			}
			for i, got := range srv.WaitFor(t, len(msgs), wait) {
				vs, err := dkim.VerifyWithOptions(bytes.NewReader(got.Data), &dkim.VerifyOptions{
					LookupTXT: func(domain string) ([]string, error) { return []string{records[domain]}, nil },
				})
				if err != nil || len(vs) != 1 || vs[0].Err != nil {
					t.Fatalf("message %d: verification %v, %+v\n%s", i, err, vs, got.Data)
				}
				signed := vs[0].HeaderKeys
				// Reply-To and Cc are signed absent: a recipient resending
				// the signed email cannot add them.
				for _, h := range []string{"list-unsubscribe", "list-unsubscribe-post", "feedback-id", "from", "subject", "reply-to", "cc"} {
					if !slices.ContainsFunc(signed, func(k string) bool { return strings.EqualFold(k, h) }) {
						t.Errorf("message %d: %s not signed (h=%v)", i, h, signed)
					}
				}
				if want := verp.Address(msgs[i].BatchID); got.From != want {
					t.Errorf("message %d: MAIL FROM %q, want %q", i, got.From, want)
				}
				if got.Header.Get("Feedback-ID") != "notifications:example.com" {
					t.Errorf("message %d: Feedback-ID %q", i, got.Header.Get("Feedback-ID"))
				}
			}
		})
	}
}

// signedSamples are emails that exercise what a relay or a second
// writing could change: non-ASCII text, long lines, dots at line starts,
// an http unsubscribe link (written by another go-mail path).
func signedSamples() []*mailtemplates.Message {
	plain := message("3 new comments")
	utf := message("Ünïcödé — 3 nouveaux commentaires ✓")
	utf.ToName, utf.BatchID = "Zoë Ñandú", 43
	utf.Text = "Première ligne\n.starts with a dot\n" + strings.Repeat("long line ", 200)
	utf.HTML = "<p>" + strings.Repeat("é", 3000) + "</p>"
	local := message("local demo")
	local.UnsubscribeURL, local.BatchID = "http://localhost:8080/unsubscribe?token=a%20b", 44
	return []*mailtemplates.Message{plain, utf, local}
}

// TestNoEnvelopeChangesNothing holds the default to what lull sent before:
// the From address as envelope sender, no Feedback-ID, no signature.
func TestNoEnvelopeChangesNothing(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	s := newSMTP(t, mail.SMTPConfig{URL: srv.URL()})
	if err := s.Send(t.Context(), message("hi")); err != nil {
		t.Fatal(err)
	}
	got := srv.WaitFor(t, 1, wait)[0]
	if got.From != "lull@example.com" || got.Header.Get("DKIM-Signature") != "" || got.Header.Get("Feedback-ID") != "" {
		t.Fatalf("MAIL FROM %q, headers %v", got.From, got.Header)
	}
}

func TestNewDKIMRefusesBadKeys(t *testing.T) {
	t.Parallel()
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	weak := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)}))
	for name, key := range map[string]string{
		"Weak":       weak,
		"NotPEM":     "-----BEGIN nothing",
		"Garbage":    "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		"NoSuchFile": filepath.Join(t.TempDir(), "missing.pem"),
	} {
		if _, err := mail.NewDKIM(key, "s", "example.com"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A key with a passphrase is refused saying so, in either PEM form.
	for _, key := range []string{
		"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHzBJBgkqhkiG9w0BBQ0wPDAbBgkqhkiG9w0BBQwwDgQI\n-----END ENCRYPTED PRIVATE KEY-----\n",
		"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0123456789ABCDEF0123456789ABCDEF\n\nAAAA\n-----END RSA PRIVATE KEY-----\n",
	} {
		if _, err := mail.NewDKIM(key, "s", "example.com"); err == nil || !strings.Contains(err.Error(), "passphrase") {
			t.Errorf("an encrypted key: %v, want an error naming the passphrase", err)
		}
	}
	if _, err := mail.NewDKIM(weak, "", "example.com"); err == nil {
		t.Error("accepted a key without a selector")
	}
}
