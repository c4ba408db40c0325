package mail

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// security is how a connection is encrypted.
type security int

const (
	// startTLSOpportunistic upgrades with STARTTLS when the server offers
	// it and otherwise talks plain text: smtp:// without options.
	startTLSOpportunistic security = iota
	// startTLSRequired refuses a server without STARTTLS rather than fall
	// back to plain text: smtp://...?starttls=required.
	startTLSRequired
	// implicitTLS speaks TLS from the first byte: smtps://.
	implicitTLS
)

// dialTimeout bounds connecting and each message's SMTP conversation;
// go-mail extends the deadline before every message.
const dialTimeout = 30 * time.Second

// endpoint is a parsed LULL_SMTP_URL.
type endpoint struct {
	host       string
	port       int
	security   security
	user, pass string
	// skipVerify accepts any certificate, for a self-signed test relay.
	skipVerify bool
	// insecureAuth sends the password with PLAIN even without TLS, for a
	// relay on a trusted network that offers no TLS at all.
	insecureAuth bool
}

// parseURL reads an LULL_SMTP_URL:
//
//	smtp://[user[:pass]@]host[:port][?starttls=required|opportunistic]
//	smtps://[user[:pass]@]host[:port]
//
// plus ?insecure_skip_verify=true and ?insecure_auth=true. smtp:// uses
// port 587 (submission) and smtps:// 465 unless one is given. An unknown
// option is an error rather than ignored, so a typo in starttls=required
// cannot silently turn into plain text. Errors never repeat the password.
func parseURL(raw string) (endpoint, error) {
	var e endpoint
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the whole URL, password included; its inner
		// error says what is wrong without it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return e, fmt.Errorf("LULL_SMTP_URL: %v; want smtp://user:pass@host:port or smtps://...", err)
	}
	bad := func(format string, args ...any) (endpoint, error) {
		return endpoint{}, fmt.Errorf("LULL_SMTP_URL %s: %s", u.Redacted(), fmt.Sprintf(format, args...))
	}
	switch u.Scheme {
	case "smtp":
		e.port = 587
	case "smtps":
		e.port = 465
		e.security = implicitTLS
	case "":
		return bad("no scheme; want smtp://user:pass@host:port or smtps://...")
	default:
		return bad("scheme %q; want smtp or smtps", u.Scheme)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return bad("no host; want %s://user:pass@host:port", u.Scheme)
	}
	if u.Path != "" && u.Path != "/" {
		return bad("unexpected path %q", u.Path)
	}
	e.host = u.Hostname()
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad("port %q is not a number from 1 to 65535", p)
		}
		e.port = n
	}
	if u.User != nil {
		e.user = u.User.Username()
		e.pass, _ = u.User.Password()
	}
	for key, values := range u.Query() {
		v := values[len(values)-1]
		switch key {
		case "starttls":
			switch {
			case e.security == implicitTLS:
				return bad("starttls does not apply to smtps://, which is TLS from the start")
			case v == "required":
				e.security = startTLSRequired
			case v == "opportunistic":
				e.security = startTLSOpportunistic
			default:
				return bad("starttls=%q; want required or opportunistic", v)
			}
		case "insecure_skip_verify", "insecure_auth":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return bad("%s=%q; want true or false", key, v)
			}
			if key == "insecure_skip_verify" {
				e.skipVerify = b
			} else {
				e.insecureAuth = b
			}
		default:
			return bad("unknown option %q; known: starttls, insecure_skip_verify, insecure_auth", key)
		}
	}
	return e, nil
}

// options are the go-mail client options for e.
func (e endpoint) options() []gomail.Option {
	tlsConf := &tls.Config{ServerName: e.host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: e.skipVerify}
	opts := []gomail.Option{gomail.WithPort(e.port), gomail.WithTimeout(dialTimeout), gomail.WithTLSConfig(tlsConf)}
	switch e.security {
	case implicitTLS:
		opts = append(opts, gomail.WithSSL())
	case startTLSRequired:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	}
	if e.user != "" {
		// Auto-discovery picks the strongest mechanism the server offers
		// and never sends a password in the clear: without TLS it allows
		// only challenge-response mechanisms. insecure_auth allows PLAIN
		// without TLS for a relay on a trusted network.
		auth := gomail.SMTPAuthAutoDiscover
		if e.insecureAuth {
			auth = gomail.SMTPAuthPlainNoEnc
		}
		opts = append(opts, gomail.WithSMTPAuth(auth), gomail.WithUsername(e.user), gomail.WithPassword(e.pass))
	}
	return opts
}

// String is the endpoint for logs, without the password.
func (e endpoint) String() string {
	scheme := "smtp"
	if e.security == implicitTLS {
		scheme = "smtps"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(e.host, strconv.Itoa(e.port))}
	if e.user != "" {
		u.User = url.User(e.user)
	}
	return u.String()
}
