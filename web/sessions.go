package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"net"
	"net/http"
	"strings"

	"github.com/gorilla/sessions"
)

// Cookie names: recipients and operators have separate sessions, so a
// recipient's cookie can never open the operator console.
const (
	recipientSession = "lull_settings"
	operatorSession  = "lull_admin"
)

// newSessionStore derives the cookie keys from the server secret: one to
// sign, one to encrypt. Cookies are HttpOnly, SameSite=Lax, and Secure
// when lull is served over https.
func newSessionStore(secret []byte, baseURL string) *sessions.CookieStore {
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(label))
		return m.Sum(nil)
	}
	store := sessions.NewCookieStore(derive("session-sign"), derive("session-encrypt"))
	store.Options = &sessions.Options{
		Path:     "/",
		MaxAge:   7 * 24 * 3600,
		HttpOnly: true,
		Secure:   strings.HasPrefix(baseURL, "https://"),
		SameSite: http.SameSiteLaxMode,
	}
	return store
}

// sessionValue returns the string stored under key in the named session
// cookie, or "". A cookie that does not decode (signed with a secret
// since changed, cut short, or never lull's) is no session: it is
// cleared, so the browser stops sending it, and the request goes on as
// one without a session.
func (s *Server) sessionValue(w http.ResponseWriter, r *http.Request, name, key string) string {
	sess, err := s.sessions.Get(r, name)
	if err != nil {
		sess.Options.MaxAge = -1
		sess.Save(r, w)
		return ""
	}
	v, _ := sess.Values[key].(string)
	return v
}

// clientIP is the request's remote address without the port.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
