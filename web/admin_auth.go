package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/views"
)

type operatorKey struct{}

// flashKey holds the message the previous request left for this page.
type flashKey struct{}

// operatorSessionTTL is how long an operator stays logged in.
const operatorSessionTTL = 12 * time.Hour

// requireOperator lets only a logged-in operator through. Pages redirect
// to the login form; actions are refused. The session cookie carries a
// token that must match a live row of operator_sessions, so a session
// ended by logout or a new password is over even for a copied cookie; a
// cookie that does not decode is cleared (see sessionValue).
func (s *Server) requireOperator(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token := s.sessionValue(w, r, operatorSession, "sid")
		var op db.Operator
		var err error
		if token != "" {
			op, err = db.OperatorBySession(r.Context(), s.DB.Pool, token)
		}
		if err != nil && !errors.Is(err, db.ErrNotFound) {
			s.pageError(w, r, err)
			return
		}
		if err != nil || token == "" {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, loginURL(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			s.message(w, r, http.StatusForbidden, "Log in first", "Operator actions need an operator session.")
			return
		}
		ctx := context.WithValue(r.Context(), operatorKey{}, op.Email)
		if r.Method == http.MethodGet {
			ctx = context.WithValue(ctx, flashKey{}, s.takeFlash(w, r))
		}
		next(w, r.WithContext(ctx))
	}
}

// takeFlash reads the message an action left and saves the session
// without it, so it shows on one page only.
func (s *Server) takeFlash(w http.ResponseWriter, r *http.Request) string {
	sess, err := s.sessions.Get(r, operatorSession)
	if err != nil {
		return ""
	}
	f := sess.Flashes()
	if len(f) == 0 {
		return ""
	}
	sess.Save(r, w)
	msg, _ := f[0].(string)
	return msg
}

// loginURL is the login form that returns to page afterwards.
func loginURL(page string) string {
	if page == "/admin" {
		return "/admin/login"
	}
	return "/admin/login?" + url.Values{"next": {page}}.Encode()
}

// localNext returns next if it is a console page on this server, else "".
// Anything a browser could read as another host is refused: "//evil",
// "/\evil", absolute URLs, control characters browsers strip, and dot
// segments that climb out of /admin.
func localNext(next string) string {
	if len(next) > 2000 || !strings.HasPrefix(next, "/admin") || strings.ContainsAny(next, "\\") {
		return ""
	}
	for _, c := range next {
		if c < 0x20 || c == 0x7f {
			return ""
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" {
		return ""
	}
	// Browsers resolve dot segments, percent-encoded ones too (u.Path has
	// them decoded), so the page is read as they will read it.
	if p := path.Clean(u.Path); p != "/admin" && !strings.HasPrefix(p, "/admin/") {
		return ""
	}
	return next
}

func operator(r *http.Request) string {
	email, _ := r.Context().Value(operatorKey{}).(string)
	return email
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	v := views.LoginView{Page: s.page("Log in"), Next: localNext(r.URL.Query().Get("next"))}
	s.render(w, r, http.StatusOK, views.Login(v))
}

// login checks an operator's password. Attempts are throttled per client
// address and per account (the email as Authenticate reads it), so that
// many addresses cannot try one account's password at the rate of all
// of them together; an attempt refused for its address does not count
// against the account. A failed login says nothing about which part was
// wrong, and a throttled one not which limit it met.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	next := localNext(r.PostFormValue("next"))
	v := views.LoginView{Page: s.page("Log in"), Email: email, Next: next}
	now := s.now()
	if !s.loginLimiter.allow(clientIP(r), now) || !s.accountLimiter.allow(strings.ToLower(email), now) {
		v.Error = "Too many attempts. Wait a minute and try again."
		s.render(w, r, http.StatusTooManyRequests, views.Login(v))
		return
	}
	op, err := db.Authenticate(r.Context(), s.DB.Pool, email, r.PostFormValue("password"))
	if errors.Is(err, db.ErrNotFound) {
		v.Error = "Wrong email or password."
		s.render(w, r, http.StatusUnauthorized, views.Login(v))
		return
	}
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	// A new session on login, with a new token: nothing set before it
	// survives (no fixation).
	token, err := db.CreateOperatorSession(r.Context(), s.DB.Pool, op.ID, operatorSessionTTL)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	sess, _ := s.sessions.New(r, operatorSession)
	sess.Values = map[any]any{"sid": token}
	sess.Options.MaxAge = int(operatorSessionTTL / time.Second)
	if err := sess.Save(r, w); err != nil {
		s.pageError(w, r, err)
		return
	}
	if next == "" {
		next = "/admin"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the operator session on the server, then expires its
// cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	sess, _ := s.sessions.Get(r, operatorSession)
	if token, _ := sess.Values["sid"].(string); token != "" {
		if err := db.EndOperatorSession(r.Context(), s.DB.Pool, token); err != nil {
			s.pageError(w, r, err)
			return
		}
	}
	sess.Values = map[any]any{}
	sess.Options.MaxAge = -1
	sess.Save(r, w)
	http.Redirect(w, r, "/admin/login", http.StatusSeeOther)
}

// adminPage fills what every console page shares.
func (s *Server) adminPage(r *http.Request, title, section string) views.AdminPage {
	p := views.AdminPage{Page: s.page(title), Operator: operator(r), Section: section}
	p.Flash, _ = r.Context().Value(flashKey{}).(string)
	return p
}

// flashRedirect stores a message for the next page and redirects there.
func (s *Server) flashRedirect(w http.ResponseWriter, r *http.Request, msg, to string) {
	if sess, err := s.sessions.Get(r, operatorSession); err == nil {
		sess.Flashes() // a message not shown yet gives way to the latest
		sess.AddFlash(msg)
		sess.Save(r, w)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}
