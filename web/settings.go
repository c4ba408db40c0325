package web

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/views"
)

// settingsEnter is where the signed link of every email lands. It starts a
// recipient session and redirects to /settings, so the token does not stay
// in the address bar, the history or a Referer header.
func (s *Server) settingsEnter(w http.ResponseWriter, r *http.Request) {
	if !s.linkLimiter.allow(clientIP(r), s.now()) {
		l := s.pageLocale(r, "")
		s.localMessage(w, r, http.StatusTooManyRequests, l, "page_too_many", l.T("page_too_many_text", nil))
		return
	}
	id, err := s.Links.Verify(r.URL.Query().Get("token"), mailtemplates.PurposeSettings, s.now())
	if err == nil {
		_, err = db.GetRecipient(r.Context(), s.DB.Bun, id)
	}
	if err != nil {
		s.badLink(w, r, err, "settings_link_next")
		return
	}
	// A fresh session each time, so a session id planted before the link
	// was opened is never promoted (no fixation).
	sess, _ := s.sessions.New(r, recipientSession)
	sess.Values = map[any]any{"rid": id}
	if err := sess.Save(r, w); err != nil {
		s.problem(w, r, err)
		return
	}
	http.Redirect(w, r, "/settings", http.StatusSeeOther)
}

// badLink answers a settings or unsubscribe link that failed to verify:
// one past its expiry, or one that is not whole or not genuine (or names
// a recipient no longer known). next says what to do instead, as a
// catalog key. The link names no recipient it can be trusted for, so the
// page speaks the browser's language.
func (s *Server) badLink(w http.ResponseWriter, r *http.Request, err error, next string) {
	l := s.pageLocale(r, "")
	if errors.Is(err, mailtemplates.ErrExpiredLink) {
		s.localMessage(w, r, http.StatusForbidden, l, "page_link_expired", l.T(next, nil))
		return
	}
	s.localMessage(w, r, http.StatusForbidden, l, "page_link_invalid", l.T("page_link_whole", map[string]any{"Next": l.T(next, nil)}))
}

// recipientID returns the recipient of the request's session, or "".
func (s *Server) recipientID(w http.ResponseWriter, r *http.Request) string {
	return s.sessionValue(w, r, recipientSession, "rid")
}

func (s *Server) settingsPage(w http.ResponseWriter, r *http.Request) {
	id := s.recipientID(w, r)
	if id == "" {
		l := s.pageLocale(r, "")
		s.localMessage(w, r, http.StatusUnauthorized, l, "settings_open_link", l.T("settings_open_link_text", nil))
		return
	}
	rec, prefs, err := s.loadPreferences(r.Context(), id)
	if err == nil {
		// Opening the page from an email counts as being here (catch-up).
		err = db.TouchSeen(r.Context(), s.DB.Pool, id, s.now())
	}
	if err != nil {
		s.recipientError(w, r, err)
		return
	}
	sess, _ := s.sessions.Get(r, recipientSession)
	flash := ""
	if f := sess.Flashes(); len(f) > 0 {
		flash, _ = f[0].(string)
		sess.Save(r, w)
	}
	l := s.pageLocale(r, rec.Locale)
	v, err := s.settingsView(r.Context(), s.localPage(w, r, l, "settings_page_title"), rec.ID, rec.Name, preferencesBody(rec, prefs), nil)
	if err != nil {
		s.recipientError(w, r, err)
		return
	}
	// A flash is a catalog key; one left by an older version is its text.
	v.Flash = l.T(flash, nil)
	// UTC is what a recipient created without a zone has: the page offers
	// the browser's zone instead (app.js), for the recipient to save.
	v.GuessZone = rec.Timezone == "" || rec.Timezone == "UTC"
	// The page shows live data: a browser going back to it must ask again.
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, r, http.StatusOK, views.Settings(v))
}

func (s *Server) settingsSave(w http.ResponseWriter, r *http.Request) {
	id := s.postingRecipient(w, r)
	if id == "" {
		return
	}
	ctx := r.Context()
	types, err := db.ListTypes(ctx, s.DB.Bun)
	if err != nil {
		s.recipientError(w, r, err)
		return
	}
	known := map[string]bool{}
	for _, t := range types {
		known[t.Key] = true
	}
	// The form is read before the transaction: a slow client holds no lock.
	body := formPreferences(r, types)
	var rec *db.Recipient
	var invalid []FieldError
	// The row stays locked from read to write, so a change the API makes
	// in between (to a field this form does not post) is not written over.
	err = s.DB.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if rec, err = db.LockRecipient(ctx, tx, id); err != nil {
			return err
		}
		keepStoredDays(rec, &body.Digest)
		if _, shown := r.PostForm["budget"]; !shown {
			// A page loaded before the field existed keeps the budget.
			body.Budget = rec.DailyBudget
		}
		rows, errs := applyPreferences(rec, body, known)
		errs = append(errs, requiredNotOff(types, body)...)
		if invalid = append(errs, formNotEmpty(body)...); len(invalid) > 0 {
			return Invalid(invalid...)
		}
		return db.SavePreferences(ctx, tx, rec, withoutDefaults(rows, types))
	})
	if len(invalid) > 0 {
		l := s.pageLocale(r, rec.Locale)
		fields := map[string]string{}
		for _, e := range invalid {
			fields[e.Field] = fieldMessage(l, types, body, e.Field)
		}
		v, err := s.settingsView(ctx, s.localPage(w, r, l, "settings_page_title"), rec.ID, rec.Name, body, fields)
		if err != nil {
			s.recipientError(w, r, err)
			return
		}
		s.render(w, r, http.StatusUnprocessableEntity, views.Settings(v))
		return
	}
	if err != nil {
		s.recipientError(w, r, err)
		return
	}
	s.settingsDone(w, r, "settings_flash_saved")
}

// settingsDone leaves msg, a catalog key, for the settings page and goes
// back to it: post/redirect/get, so reloading or going back never
// resubmits a form. The page words it in the recipient's language.
func (s *Server) settingsDone(w http.ResponseWriter, r *http.Request, msg string) {
	sess, _ := s.sessions.Get(r, recipientSession)
	sess.AddFlash(msg)
	sess.Save(r, w)
	http.Redirect(w, r, "/settings", http.StatusSeeOther)
}

// postingRecipient is the recipient of a settings form's session, or ""
// after answering that the session has ended.
func (s *Server) postingRecipient(w http.ResponseWriter, r *http.Request) string {
	id := s.recipientID(w, r)
	if id == "" {
		l := s.pageLocale(r, "")
		s.localMessage(w, r, http.StatusUnauthorized, l, "settings_session_ended", l.T("settings_session_ended_text", nil))
	}
	return id
}

// formPreferences reads the settings form into the API's shape, so both
// go through one validation.
func formPreferences(r *http.Request, types []db.Type) PreferencesBody {
	f := func(name string) string { return strings.TrimSpace(r.PostFormValue(name)) }
	b := PreferencesBody{
		Timezone:     f("timezone"),
		Digest:       formDigest(r, f),
		Unsubscribed: f("unsubscribed") == "on",
		Types:        map[string]TypePref{},
		Budget:       formBudget(f("budget")),
	}
	if f("quiet_enabled") == "on" {
		b.QuietHours = &QuietHoursBody{Start: f("quiet_hours.start"), End: f("quiet_hours.end")}
		if b.QuietHours.Start == "" && b.QuietHours.End == "" {
			b.QuietHours.Start = "-" // enabled but empty: let validation say so
		}
	}
	for _, t := range types {
		p := "types." + t.Key + "."
		mode := f(p + "mode")
		if mode == "" {
			mode = t.DefaultMode
		}
		b.Types[t.Key] = TypePref{Mode: mode, Window: f(p + "window"), MaxWait: f(p + "max_wait")}
	}
	return b
}

// formBudget reads the budget field: empty is the default (nil), and
// what is not a whole number is -1, which the range check refuses next
// to the field.
func formBudget(s string) *int {
	n, bad := formInt(s)
	if bad {
		bad := -1
		return &bad
	}
	return n
}

// budgetField is the budget field of the settings page, in loc's
// language.
func (s *Server) budgetField(loc i18n.Locale, b PreferencesBody) views.BudgetField {
	f := views.BudgetField{Label: loc.T("budget_label", nil), Hint: loc.T("budget_hint", nil), Default: loc.T("budget_no_default", nil)}
	if s.DailyBudget > 0 {
		f.Default = loc.N("budget_default", s.DailyBudget, nil)
	}
	if b.Budget != nil && *b.Budget >= 0 {
		f.Value = itoa(*b.Budget)
	}
	return f
}

// formDigest reads the digest fields. The weekly days are checkboxes, so
// none ticked posts nothing; a hidden field says the form had every
// digest field, telling "no day" (an error) from a form loaded before the
// boxes existed (weekly_on). Such a form also leaves the monthly time
// alone, where this one must not send it empty.
func formDigest(r *http.Request, f func(string) string) DigestBody {
	d := DigestBody{DailyAt: f("digest.daily_at"), WeeklyOn: f("digest.weekly_on"), WeeklyAt: f("digest.weekly_at"),
		MonthlyAt: f("digest.monthly_at")}
	if f("digest.shown") != "" {
		d.WeeklyDays = append([]string{}, r.PostForm["digest.weekly_days"]...)
		if d.MonthlyAt == "" {
			d.MonthlyAt = "-" // cleared: let validation say so
		}
	}
	d.EveryHours = digestNumber(f("digest.every_hours"))
	d.MonthlyDay = digestNumber(f("digest.monthly_day"))
	return d
}

// keepStoredDays reads the weekly day of a page loaded before the weekly
// days were checkboxes. Such a page showed the first stored day; left as
// it was, it keeps every stored day rather than making that one the only
// day. A day changed on it is the only day, as weekly_on alone is.
func keepStoredDays(r *db.Recipient, d *DigestBody) {
	if d.WeeklyDays != nil {
		return
	}
	if on, err := preferences.ParseWeekday(d.WeeklyOn); err == nil && on == time.Weekday(r.WeeklyOn) {
		d.WeeklyOn, d.WeeklyDays = "", weekdayNames(batching.Schedule(r).WeeklyDaySet())
	}
}

// digestNumber reads a form number for the digest: empty is 0 (not
// given), and what is not a number is -1, which every range check
// refuses, so the message sits next to the field. A typed 0 ("-0" too)
// is -1 as well: it is a wrong period, not a field left out.
func digestNumber(s string) int {
	switch n, bad := formInt(s); {
	case bad || (n != nil && *n == 0):
		return -1
	case n == nil:
		return 0
	default:
		return *n
	}
}

// formNotEmpty refuses a cleared time or zone, which the API reads as
// "unchanged" but which on the form would save silently as something the
// recipient did not see. Like every error of the form, it names only the
// field: fieldMessage words it in the recipient's language.
func formNotEmpty(b PreferencesBody) []FieldError {
	var errs []FieldError
	for name, value := range map[string]string{"digest.daily_at": b.Digest.DailyAt, "digest.weekly_at": b.Digest.WeeklyAt, "timezone": b.Timezone} {
		if value == "" {
			errs = append(errs, FieldError{Field: name})
		}
	}
	if b.Digest.MonthlyAt == "-" {
		errs = append(errs, FieldError{Field: "digest.monthly_at"})
	}
	if b.Digest.WeeklyDays != nil && len(b.Digest.WeeklyDays) == 0 {
		errs = append(errs, FieldError{Field: "digest.weekly_days"})
	}
	return errs
}

// fieldErrorKeys word what is wrong with a form field, whichever check
// refused it: the form offers only valid choices, so a refusal means a
// field left empty or a hand-made request, and the remedy is the same.
var fieldErrorKeys = map[string]string{
	"timezone": "settings_error_timezone", "digest.daily_at": "settings_error_daily_at",
	"digest.weekly_at": "settings_error_weekly_at", "digest.monthly_at": "settings_error_monthly_at",
	"digest.weekly_days": "settings_error_weekly_days", "digest.weekly_on": "settings_error_weekly_days",
	"digest.every_hours": "settings_error_every_hours", "digest.monthly_day": "settings_error_monthly_day",
	"quiet_hours.start": "settings_error_quiet_start", "quiet_hours.end": "settings_error_quiet_end",
	"quiet_hours": "settings_error_quiet_hours", "budget": "budget_error",
}

// fieldMessage is the message shown next to a refused field of the
// settings form, in l's language; a type's fields name the type.
func fieldMessage(l i18n.Locale, types []db.Type, b PreferencesBody, field string) string {
	if key, ok := fieldErrorKeys[field]; ok {
		return l.T(key, nil)
	}
	key, part, _ := strings.Cut(strings.TrimPrefix(field, "types."), ".")
	for _, t := range types {
		if t.Key != key {
			continue
		}
		data := map[string]any{"Type": t.TextsIn(l.TextChain()).Name}
		switch {
		case part == "mode" && t.Required && b.Types[key].Mode == string(preferences.Never):
			return l.T("settings_error_required", data)
		case part == "window" || part == "max_wait" || part == "mode":
			return l.T("settings_error_"+part, data)
		}
	}
	return l.T("settings_error_other", nil)
}

// requiredNotOff refuses "never" for a required type, which the form does
// not offer but a hand-made request could send.
func requiredNotOff(types []db.Type, b PreferencesBody) []FieldError {
	var errs []FieldError
	for _, t := range types {
		if t.Required && b.Types[t.Key].Mode == string(preferences.Never) {
			errs = append(errs, FieldError{Field: "types." + t.Key + ".mode"})
		}
	}
	return errs
}

// withoutDefaults drops the choices that equal the type's own settings, so
// that a type left alone keeps following its defaults if they change.
func withoutDefaults(rows []db.TypePreference, types []db.Type) []db.TypePreference {
	byKey := map[string]db.Type{}
	for _, t := range types {
		byKey[t.Key] = t
	}
	var out []db.TypePreference
	for _, p := range rows {
		t := byKey[p.TypeKey]
		same := p.Mode == t.DefaultMode &&
			(p.WindowMS == nil || *p.WindowMS == t.WindowMS) &&
			(p.MaxWaitMS == nil || *p.MaxWaitMS == t.MaxWaitMS) && p.Lead == nil
		if !same {
			out = append(out, p)
		}
	}
	return out
}

// modes are the choices of a type's row, in order; each is labelled by
// the catalog's settings_mode_<mode>.
var modes = []preferences.Mode{preferences.Immediate, preferences.Cooldown, preferences.Hourly, preferences.Daily,
	preferences.Weekly, preferences.Monthly, preferences.Never}

var windowPresets = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour}
var maxWaitPresets = []time.Duration{15 * time.Minute, time.Hour, 4 * time.Hour, 24 * time.Hour, 0}

// settingsView builds the page from a preferences body (stored or just
// submitted) and the field errors to show.
func (s *Server) settingsView(ctx context.Context, page views.Page, id, name string, b PreferencesBody, errs map[string]string) (views.SettingsView, error) {
	types, err := db.ListTypes(ctx, s.DB.Bun)
	if err != nil {
		return views.SettingsView{}, err
	}
	l := page.Locale
	for i := range types {
		texts := types[i].TextsIn(l.TextChain())
		types[i].Name, types[i].Description = texts.Name, texts.Description
	}
	v := views.SettingsView{
		Page: page, RecipientName: name, Errors: errs,
		Timezone: b.Timezone, Zones: views.Zones(),
		DailyAt: b.Digest.DailyAt, WeeklyAt: b.Digest.WeeklyAt, MonthlyAt: strings.Trim(b.Digest.MonthlyAt, "-"), Unsubscribed: b.Unsubscribed,
		QuietStart: "22:00", QuietEnd: "07:00",
	}
	v.WeeklyDays, v.EveryHours, v.MonthlyDays = digestOptions(l, b.Digest)
	v.Budget = s.budgetField(l, b)
	if v.Threads, err = s.threadOptions(ctx, id, types); err != nil {
		return views.SettingsView{}, err
	}
	if q := b.QuietHours; q != nil {
		v.QuietEnabled, v.QuietStart, v.QuietEnd = true, q.Start, q.End
	}
	sched := previewSchedule(l, b)
	for _, t := range types {
		row := typeRow(l, t, b.Types[t.Key], b.Unsubscribed, sched)
		v.HasRequired = v.HasRequired || t.Required
		if n := len(v.Categories); n == 0 || v.Categories[n-1].Name != t.Category {
			v.Categories = append(v.Categories, views.CategoryView{Name: t.Category})
		}
		c := &v.Categories[len(v.Categories)-1]
		c.Types = append(c.Types, row)
	}
	return v, nil
}

// threadOptions are the threads a recipient stopped, labelled with their
// type's name and the event's batch key ("Comments · document:7").
func (s *Server) threadOptions(ctx context.Context, id string, types []db.Type) ([]views.Option, error) {
	threads, err := db.MutedThreads(ctx, s.DB.Pool, id, db.MaxMutedShown)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, t := range types {
		names[t.Key] = t.Name
	}
	out := make([]views.Option, len(threads))
	for i, th := range threads {
		label := th.BatchKey
		if typ, key, ok := strings.Cut(th.BatchKey, "+"); ok && names[typ] != "" {
			label = names[typ] + " · " + key
		}
		out[i] = views.Option{Value: th.BatchKey, Label: label}
	}
	return out, s.muteEnds(ctx, id, threads, out)
}

// settingsUnmute turns a stopped thread back on from the settings page.
func (s *Server) settingsUnmute(w http.ResponseWriter, r *http.Request) {
	id := s.postingRecipient(w, r)
	if id == "" {
		return
	}
	ctx := r.Context()
	err := s.DB.InTx(ctx, func(tx pgx.Tx) error {
		return db.UndoUnsubscribe(ctx, tx, id, db.Undo{Thread: r.PostFormValue("thread")})
	})
	if err != nil {
		s.recipientError(w, r, err)
		return
	}
	s.settingsDone(w, r, "settings_flash_unmuted")
}

// digestOptions are the weekday boxes (Monday first), the hourly periods
// and the days of the month, each with the body's choice selected.
func digestOptions(l i18n.Locale, d DigestBody) (days, hours, monthDays []views.Option) {
	chosen := d.WeeklyDays
	if chosen == nil {
		chosen = []string{d.WeeklyOn}
	}
	for i := range 7 {
		day := time.Weekday((i + 1) % 7)
		n := preferences.WeekdayName(day)
		days = append(days, views.Option{Value: n, Label: l.Weekday(day), Selected: slices.Contains(chosen, n)})
	}
	for _, h := range preferences.EveryHoursChoices {
		hours = append(hours, views.Option{Value: itoa(h), Label: preferences.HumanDuration(l, time.Duration(h)*time.Hour), Selected: h == d.EveryHours})
	}
	for day := 1; day <= 31; day++ {
		key := "settings_month_day"
		if day == 31 {
			key = "settings_month_last_day"
		} else if day >= 29 {
			key = "settings_month_day_or_last"
		}
		label := l.T(key, map[string]any{"Day": l.Number(day)})
		monthDays = append(monthDays, views.Option{Value: itoa(day), Label: label, Selected: day == d.MonthlyDay})
	}
	return days, hours, monthDays
}

func typeRow(l i18n.Locale, t db.Type, p TypePref, unsubscribed bool, sched preferences.Schedule) views.TypeRow {
	mode := p.Mode
	if mode == "" {
		mode = t.DefaultMode
	}
	window, maxWait := t.Window(), t.MaxWait()
	if d, err := preferences.ParseWindow(p.Window); err == nil {
		window = d
	}
	if d, err := preferences.ParseMaxWait(p.MaxWait); err == nil && p.MaxWait != "" {
		maxWait = d
	}
	row := views.TypeRow{Key: t.Key, Name: t.Name, Description: t.Description, Required: t.Required,
		Windows: durationOptions(l, windowPresets, window, p.Window), MaxWaits: durationOptions(l, maxWaitPresets, maxWait, p.MaxWait)}
	for _, m := range modes {
		row.Modes = append(row.Modes, views.Option{Value: string(m), Label: l.T("settings_mode_"+string(m), nil),
			Selected: string(m) == mode, Disabled: t.Required && m == preferences.Never})
	}
	o := &preferences.Override{Mode: preferences.Mode(mode), Window: &window, MaxWait: &maxWait}
	row.Preview = preferences.DescribeIn(l, preferences.Effective(batching.TypeDefaults(&t), o, unsubscribed), sched)
	return row
}

// durationOptions offers the presets plus the current value; a value the
// form sent that does not parse is kept selectable, so the error next to
// it shows what was sent.
func durationOptions(l i18n.Locale, presets []time.Duration, current time.Duration, raw string) []views.Option {
	var opts []views.Option
	found := false
	for _, d := range presets {
		sel := d == current
		found = found || sel
		opts = append(opts, views.Option{Value: preferences.FormatDuration(d), Label: durationLabel(l, d), Selected: sel})
	}
	if !found {
		opts = append(opts, views.Option{Value: preferences.FormatDuration(current), Label: durationLabel(l, current), Selected: true})
	}
	if raw != "" {
		if _, err := time.ParseDuration(raw); err != nil && raw != "0" {
			opts = append(opts, views.Option{Value: raw, Label: raw, Selected: true})
		}
	}
	return opts
}

func durationLabel(l i18n.Locale, d time.Duration) string {
	if d == 0 {
		return l.T("settings_no_limit", nil)
	}
	return preferences.HumanDuration(l, d)
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return itoa(n) + " " + unit + "s"
}

func previewSchedule(l i18n.Locale, b PreferencesBody) preferences.Schedule {
	if checkZone(b.Timezone) != "" {
		// Described in UTC, a zone that is not one would read as chosen.
		s := previewSchedule(l, PreferencesBody{Timezone: "UTC", Digest: b.Digest, QuietHours: b.QuietHours})
		s.Location = time.FixedZone(l.T("settings_zone_invalid", nil), 0)
		return s
	}
	r := &db.Recipient{Timezone: b.Timezone, DailyAt: 480, WeeklyOn: 1, WeeklyAt: 480,
		EveryHours: b.Digest.EveryHours, MonthlyDay: b.Digest.MonthlyDay, MonthlyAt: 480}
	if t, err := preferences.ParseTimeOfDay(b.Digest.DailyAt); err == nil {
		r.DailyAt = int(t)
	}
	if t, err := preferences.ParseTimeOfDay(b.Digest.WeeklyAt); err == nil {
		r.WeeklyAt = int(t)
	}
	if d, err := preferences.ParseWeekday(b.Digest.WeeklyOn); err == nil {
		r.WeeklyOn = int(d)
	}
	if w, err := preferences.ParseWeekdays(b.Digest.WeeklyDays); err == nil {
		r.WeeklyDays = int(w)
	}
	if t, err := preferences.ParseTimeOfDay(b.Digest.MonthlyAt); err == nil {
		r.MonthlyAt = int(t)
	}
	return batching.Schedule(r)
}

func isNotFound(err error) bool { return errors.Is(err, db.ErrNotFound) }
