package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	htmltemplate "html/template"
	"net/http"
	"net/mail"
	"strings"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/views"
)

// Mailer sends the emails a page sends itself: the personal link the
// shared-unsubscribe page mails. cmd wires in the flush's sender.
type Mailer interface {
	Send(context.Context, *mailtemplates.Message) error
}

// A shared email (jobs/shared.go) goes to many recipients alike, so its
// unsubscribe link names only the type. Its page asks for an address and
// mails each recipient with that address their own signed unsubscribe
// link for the type; only the owner of an address can open it, so nobody
// can unsubscribe someone else. The answer is the same whether or not
// the address gets these emails, and the mail goes out after the answer,
// so neither the page nor its timing tells who does.

// sharedUnsubscribeType verifies the link and loads its type, answering
// the request itself when it cannot.
func (s *Server) sharedUnsubscribeType(w http.ResponseWriter, r *http.Request) (*db.Type, bool) {
	_, key, err := s.Links.VerifyData(r.URL.Query().Get("token"), mailtemplates.PurposeSharedUnsubscribe, s.now())
	var typ *db.Type
	if err == nil {
		typ, err = db.GetType(r.Context(), s.DB.Pool, key)
	}
	if err != nil {
		s.badLink(w, r, err, unsubscribeNext)
		return nil, false
	}
	return typ, true
}

func (s *Server) sharedUnsubscribeView(w http.ResponseWriter, r *http.Request, typ *db.Type, sent bool, address string) views.SharedUnsubscribeView {
	lang := i18n.Resolve("", r.Header.Get("Accept-Language"), s.DefaultLocale)
	name := batching.TemplateTypeIn(typ, lang.TextChain()).Name
	v := views.SharedUnsubscribeView{Page: s.recipientPage(w, r, lang.T("shared_unsub_title", map[string]any{"Type": name})),
		Action: r.URL.RequestURI(), Sent: sent}
	v.Heading = v.Page.Title
	v.Intro, v.Label, v.Button = lang.T("shared_unsub_intro", nil), lang.T("shared_unsub_address", nil), lang.T("shared_unsub_send", nil)
	if sent {
		v.Heading = lang.T("shared_unsub_sent_title", nil)
		v.Intro = lang.T("shared_unsub_sent", map[string]any{"Email": address, "Type": name})
	}
	return v
}

// sharedUnsubscribePage shows the form; opening it changes nothing.
func (s *Server) sharedUnsubscribePage(w http.ResponseWriter, r *http.Request) {
	typ, ok := s.sharedUnsubscribeType(w, r)
	if !ok {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, r, http.StatusOK, views.SharedUnsubscribe(s.sharedUnsubscribeView(w, r, typ, false, "")))
}

// sharedUnsubscribeSend mails the address's recipients their own link,
// at most once per address every ten minutes, so the page cannot be used
// to flood someone's inbox.
func (s *Server) sharedUnsubscribeSend(w http.ResponseWriter, r *http.Request) {
	if !s.linkLimiter.allow(clientIP(r), s.now()) {
		l := s.pageLocale(r, "")
		s.localMessage(w, r, http.StatusTooManyRequests, l, "page_too_many", l.T("page_wait_try_again", nil))
		return
	}
	typ, ok := s.sharedUnsubscribeType(w, r)
	if !ok {
		return
	}
	a, err := mail.ParseAddress(r.PostFormValue("email"))
	if err != nil || len(a.Address) > 320 {
		w.Header().Set("Cache-Control", "no-store")
		s.render(w, r, http.StatusUnprocessableEntity, views.SharedUnsubscribe(s.sharedUnsubscribeView(w, r, typ, false, "")))
		return
	}
	address := db.NormalizeAddress(a.Address)
	if s.Mail != nil && s.addressLimiter.allow(address, s.now()) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Minute)
		go func() {
			defer cancel()
			if err := s.mailUnsubscribeLinks(ctx, typ, address); err != nil {
				s.Logger.Warn("shared unsubscribe: mail the link", "type", typ.Key, "err", err)
			}
		}()
	}
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, r, http.StatusOK, views.SharedUnsubscribe(s.sharedUnsubscribeView(w, r, typ, true, address)))
}

// mailUnsubscribeLinks sends every active recipient with address who
// gets typ the link that stops it for them, in their language.
func (s *Server) mailUnsubscribeLinks(ctx context.Context, typ *db.Type, address string) error {
	recs, err := db.RecipientsByAddress(ctx, s.DB.Pool, address, typ.Key)
	if err != nil {
		return err
	}
	brand := s.Brands.Get(ctx)
	for _, rec := range recs {
		lang := i18n.Resolve(rec.Locale, "", s.DefaultLocale)
		data := map[string]any{"Type": batching.TemplateTypeIn(typ, lang.TextChain()).Name, "Email": rec.Email}
		link := s.Links.UnsubscribeURL(rec.ID, []string{typ.Key}, s.now())
		body, ignore := lang.T("shared_unsub_mail_body", data), lang.T("shared_unsub_mail_ignore", nil)
		var html strings.Builder
		if err := linkMail.Execute(&html, map[string]string{"Lang": lang.Tag(), "Body": body, "Link": link, "Ignore": ignore}); err != nil {
			return err
		}
		m := &mailtemplates.Message{From: brand.Sender(s.MailFrom), To: rec.Email, Date: s.now(),
			Subject:   mailtemplates.Subject(lang.T("shared_unsub_title", data)),
			MessageID: "unsubscribe-" + randomHex() + "@" + domainOf(s.MailFrom),
			Text:      body + "\n\n<" + link + ">\n\n" + ignore + "\n", HTML: html.String()}
		if err := s.Mail.Send(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

var linkMail = htmltemplate.Must(htmltemplate.New("").Parse(`<!DOCTYPE html>
<html lang="{{.Lang}}"><body style="font-family:sans-serif;line-height:1.5">
<p>{{.Body}}</p>
<p><a href="{{.Link}}">{{.Link}}</a></p>
<p style="color:#52525b">{{.Ignore}}</p>
</body></html>
`))

func randomHex() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// domainOf is the domain of the From address, for a Message-ID.
func domainOf(from string) string {
	a, err := mail.ParseAddress(from)
	if err != nil || !strings.Contains(a.Address, "@") {
		return "localhost"
	}
	return a.Address[strings.LastIndex(a.Address, "@")+1:]
}
