package mail

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/emersion/go-msgauth/dkim"
)

// dkimHeaders are the headers every signature covers. RFC 8058 requires
// List-Unsubscribe and List-Unsubscribe-Post to be signed, or receivers
// ignore them, and Gmail's feedback loop wants Feedback-ID signed. A name
// listed but absent from an email is signed as absent, so nobody on the
// way can add it: Reply-To and Cc above all, which a recipient who
// resends a signed email (a DKIM replay) would otherwise add to have
// answers go to them under lull's signature (RFC 6376 section 5.4.1).
var dkimHeaders = []string{
	"From", "Reply-To", "To", "Cc", "Subject", "Date", "Message-ID",
	"In-Reply-To", "References", "List-Id",
	"List-Unsubscribe", "List-Unsubscribe-Post", "Feedback-ID",
	"MIME-Version", "Content-Type", "Content-Transfer-Encoding",
}

// DKIM signs outgoing email for one domain (LULL_DKIM_DOMAIN), whose DNS
// publishes the public key at <Selector>._domainkey.<Domain>.
type DKIM struct {
	Domain   string
	Selector string
	Key      crypto.Signer // *rsa.PrivateKey or ed25519.PrivateKey
}

// NewDKIM reads the private key from key: PEM text, or the path of a PEM
// file. PKCS #1 and PKCS #8 RSA keys (2048 bits or more, as receivers
// demand) and PKCS #8 Ed25519 keys are accepted.
func NewDKIM(key, selector, domain string) (*DKIM, error) {
	if selector == "" || domain == "" {
		return nil, errors.New("LULL_DKIM_KEY needs LULL_DKIM_SELECTOR and LULL_DKIM_DOMAIN")
	}
	data := []byte(key)
	if !strings.Contains(key, "-----BEGIN") {
		b, err := os.ReadFile(key)
		if err != nil {
			return nil, fmt.Errorf("LULL_DKIM_KEY: %w", err)
		}
		data = b
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("LULL_DKIM_KEY: no PEM block")
	}
	// An encrypted key would otherwise fail with an ASN.1 error that does
	// not say what to do.
	if block.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED") {
		return nil, errors.New("LULL_DKIM_KEY: the key is encrypted with a passphrase; give it unencrypted (openssl pkey -in key.pem -out plain.pem) and protect the file instead")
	}
	var parsed any
	var err error
	if block.Type == "RSA PRIVATE KEY" {
		parsed, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	} else {
		parsed, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("LULL_DKIM_KEY: %w", err)
	}
	switch k := parsed.(type) {
	case *rsa.PrivateKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("LULL_DKIM_KEY: an RSA key of %d bits; receivers want 2048 or more", k.N.BitLen())
		}
		return &DKIM{Domain: domain, Selector: selector, Key: k}, nil
	case ed25519.PrivateKey:
		return &DKIM{Domain: domain, Selector: selector, Key: k}, nil
	}
	return nil, fmt.Errorf("LULL_DKIM_KEY: a %T; use RSA or Ed25519", parsed)
}

// signed returns data, a whole email, with its DKIM-Signature header
// first. Relaxed canonicalization forgives what relays commonly do to
// whitespace and header folding.
func (d *DKIM) signed(data []byte) ([]byte, error) {
	name, value, err := d.signature(data)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(name)+len(value)+4+len(data))
	out = append(append(append(append(out, name...), ": "...), value...), "\r\n"...)
	return append(out, data...), nil
}

// signature signs the email data and returns the header's name and
// value, signed over the headers of dkimHeaders.
func (d *DKIM) signature(data []byte) (name, value string, err error) {
	s, err := dkim.NewSigner(&dkim.SignOptions{
		Domain: d.Domain, Selector: d.Selector, Signer: d.Key,
		HeaderCanonicalization: dkim.CanonicalizationRelaxed,
		BodyCanonicalization:   dkim.CanonicalizationRelaxed,
		HeaderKeys:             dkimHeaders,
	})
	if err != nil {
		return "", "", fmt.Errorf("dkim: %w", err)
	}
	if _, err := s.Write(data); err != nil {
		s.Close()
		return "", "", fmt.Errorf("dkim: %w", err)
	}
	if err := s.Close(); err != nil {
		return "", "", fmt.Errorf("dkim: %w", err)
	}
	name, value, _ = strings.Cut(s.Signature(), ":")
	return name, strings.TrimSpace(value), nil
}
