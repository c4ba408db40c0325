package web

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/views"
)

type operatorKey struct{}

// requireOperator lets only a logged-in operator through. Pages redirect
// to the login form; actions are refused.
func (s *Server) requireOperator(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, err := s.sessions.Get(r, operatorSession)
		email, _ := sess.Values["op"].(string)
		if err != nil || email == "" {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/admin/login", http.StatusSeeOther)
				return
			}
			s.message(w, r, http.StatusForbidden, "Log in first", "Operator actions need an operator session.")
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), operatorKey{}, email)))
	}
}

func operator(r *http.Request) string {
	email, _ := r.Context().Value(operatorKey{}).(string)
	return email
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, views.Login(views.LoginView{Page: s.page("Log in")}))
}

// login checks an operator's password. Attempts are throttled per client
// address, and a failed login says nothing about which part was wrong.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	v := views.LoginView{Page: s.page("Log in"), Email: email}
	if !s.loginLimiter.allow(clientIP(r), s.now()) {
		v.Error = "Too many attempts. Wait a minute and try again."
		s.render(w, r, http.StatusTooManyRequests, views.Login(v))
		return
	}
	op, err := s.DB.Authenticate(r.Context(), email, r.PostFormValue("password"))
	if errors.Is(err, db.ErrNotFound) {
		v.Error = "Wrong email or password."
		s.render(w, r, http.StatusUnauthorized, views.Login(v))
		return
	}
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	// A new session on login: nothing set before it survives (no fixation).
	sess, _ := s.sessions.New(r, operatorSession)
	sess.Values = map[any]any{"op": op.Email}
	sess.Options.MaxAge = 12 * 3600
	if err := sess.Save(r, w); err != nil {
		s.pageError(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin", http.StatusSeeOther)
}

// logout ends the operator session by expiring its cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	sess, _ := s.sessions.Get(r, operatorSession)
	sess.Values = map[any]any{}
	sess.Options.MaxAge = -1
	sess.Save(r, w)
	http.Redirect(w, r, "/admin/login", http.StatusSeeOther)
}

// adminPage fills what every console page shares.
func (s *Server) adminPage(r *http.Request, title, section string) views.AdminPage {
	p := views.AdminPage{Page: s.page(title), Operator: operator(r), Section: section}
	if sess, err := s.sessions.Get(r, operatorSession); err == nil {
		if f := sess.Flashes(); len(f) > 0 {
			p.Flash, _ = f[0].(string)
		}
	}
	return p
}

// flashRedirect stores a message for the next page and redirects there.
func (s *Server) flashRedirect(w http.ResponseWriter, r *http.Request, msg, to string) {
	if sess, err := s.sessions.Get(r, operatorSession); err == nil {
		sess.AddFlash(msg)
		sess.Save(r, w)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}
