// Package preferences holds lull's batching rules as pure functions of a
// recipient's preferences and the time: which delivery mode applies, how
// notifications are grouped, and when a batch closes. Nothing here reads a
// clock, a database or the environment, so the ingest path, the flush jobs,
// the API, the settings page and the simulator can all call the same code
// and get the same answer to "when does this batch close?".
//
// The files follow the concepts: mode.go is the delivery choice and how it
// is resolved, schedule.go the recipient's calendar (digest times, quiet
// hours, time zones), close.go the close time of a batch and what joins it,
// describe.go the same rules in words for the settings page.
package preferences

import (
	"fmt"
	"strings"
	"time"
)

// Mode is how one recipient gets one notification type. It is stored as
// text (the values are the ones in DESIGN.md and in the database's CHECK
// constraints), so the constants are the wire and storage format too.
type Mode string

// The delivery modes of DESIGN.md, "Delivery modes".
const (
	// Never stores nothing: the notification is counted as suppressed, and
	// turning the type back on later does not deliver what was muted.
	Never Mode = "never"
	// Immediate sends one email per notification, subject to the burst
	// guard and quiet hours.
	Immediate Mode = "immediate"
	// Cooldown holds notifications until a window passes without a new one,
	// capped by a maximum wait.
	Cooldown Mode = "cooldown"
	// Daily folds the type into the recipient's one daily digest.
	Daily Mode = "daily"
	// Weekly folds the type into the recipient's one weekly digest, sent
	// on each of their weekly days.
	Weekly Mode = "weekly"
	// Hourly folds the type into a digest sent every few hours (1, 2, 4, 6
	// or 12, the recipient's choice), on the hour grid through their daily
	// time.
	Hourly Mode = "hourly"
	// Monthly folds the type into a digest sent on one day of the month.
	Monthly Mode = "monthly"
)

// validModes is the order in which modes are named in error messages and
// offered to people: from least to most email held back.
var validModes = [...]Mode{Never, Immediate, Cooldown, Hourly, Daily, Weekly, Monthly}

// ParseMode accepts exactly one of the mode names. It is strict (no case
// folding, no trimming) because callers validate with it and then store the
// string they were given, and the database accepts only these spellings.
// The error names every valid mode so an API client can correct itself.
func ParseMode(s string) (Mode, error) {
	if m := Mode(s); m.valid() {
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q: use never, immediate, cooldown, hourly, daily, weekly or monthly", s)
}

// Digest reports whether m gathers every type into one email per
// recipient at set times (hourly, daily, weekly, monthly), as opposed to
// a batch per type that closes on its own activity.
func (m Mode) Digest() bool {
	return m == Hourly || m == Daily || m == Weekly || m == Monthly
}

func (m Mode) valid() bool {
	for _, v := range validModes {
		if m == v {
			return true
		}
	}
	return false
}

// ParseWindow reads a cooldown window as a Go duration ("90s", "5m",
// "1h30m"). A window under one second is refused: it would close the batch
// as soon as it opens, which is Immediate under another name, and it is
// finer than the timers can honour.
func ParseWindow(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: use a Go duration such as 90s, 5m or 1h", s)
	}
	if d < time.Second {
		return 0, fmt.Errorf("%q is too short: a window is at least 1s", s)
	}
	if d%time.Millisecond != 0 {
		return 0, errFinerThanMillisecond(s)
	}
	return d, nil
}

// errFinerThanMillisecond refuses a duration such as "1.0000001s":
// durations are stored in milliseconds, and one accepted here but cut when
// stored would read back as something else than was saved.
func errFinerThanMillisecond(s string) error {
	return fmt.Errorf("%q is more precise than a millisecond: round it, such as 1.5s", s)
}

// ParseMaxWait reads a cooldown's cap on waiting as a Go duration. Zero
// ("0", "0s", "0m" ...) means no cap, which is a deliberate choice a
// recipient can make; anything else must be at least one second for the
// same reason as ParseWindow. A negative cap is refused rather than read
// as "no cap", so a typo cannot silently remove the limit.
func ParseMaxWait(s string) (time.Duration, error) {
	if s == "0" {
		// time.ParseDuration accepts a bare "0" too; saying so here keeps
		// the promise to FormatDuration visible.
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: use a Go duration such as 30m or 1h, or 0 for no limit", s)
	}
	if d < 0 || (d > 0 && d < time.Second) {
		return 0, fmt.Errorf("%q is not allowed: a maximum wait is 0 (no limit) or at least 1s", s)
	}
	if d%time.Millisecond != 0 {
		return 0, errFinerThanMillisecond(s)
	}
	return d, nil
}

// FormatDuration writes d in the short form people type and the API
// returns: "0", "90s", "5m", "1h", "1h30m". Zero units are left out
// ("1h5s", not "1h0m5s"), and an uneven duration under two minutes is
// written in seconds ("90s", not "1m30s") because that is how short
// windows are chosen and how the presets spell them. Every result reads
// back through ParseWindow or ParseMaxWait (whichever accepts it) to the
// same duration; durations those refuse (negative, or with a fraction of
// a second) fall back to Go's own spelling, which still parses.
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < 0 || d%time.Second != 0:
		return d.String()
	case d < 2*time.Minute && d%time.Minute != 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	var b strings.Builder
	h, m, s := d/time.Hour, d%time.Hour/time.Minute, d%time.Minute/time.Second
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if s > 0 {
		fmt.Fprintf(&b, "%ds", s)
	}
	return b.String()
}

// Policy is the effective delivery choice for one recipient and one type,
// after Effective has applied the recipient's override, unsubscribe-all
// and the type's required flag. The engine acts on a Policy only, never on
// the raw settings, so every caller resolves them the same way.
type Policy struct {
	// Mode is how notifications are delivered.
	Mode Mode
	// Window is the cooldown: a batch closes Window after its last event.
	// Only Cooldown uses it.
	Window time.Duration
	// MaxWait caps a cooldown batch at MaxWait after it opened, so a
	// steady trickle cannot hold it forever; 0 means no cap.
	MaxWait time.Duration
	// Lead sends the first notification of a quiet period at once and
	// batches what follows; only Cooldown uses it.
	Lead bool
}

// TypeDefaults are a notification type's own settings: what a recipient
// gets when they have not chosen otherwise.
type TypeDefaults struct {
	// Required types (security alerts, say) ignore Never and
	// unsubscribe-all.
	Required bool
	// Mode is the type's default delivery mode.
	Mode Mode
	// Window, MaxWait and Lead are the type's cooldown parameters.
	Window, MaxWait time.Duration
	Lead            bool
}

// Override is a recipient's stored choice for one type. An empty Mode and
// nil pointers mean "not chosen", and fall back to the type's values, so a
// recipient who only picked a mode still follows later changes to the
// type's window.
type Override struct {
	Mode            Mode
	Window, MaxWait *time.Duration
	Lead            *bool
}

// defaultWindow is the cooldown used when neither the recipient nor the
// type gives one. It is the window a type gets when saved without one, so
// a type stored before that default existed behaves like a new one.
const defaultWindow = 5 * time.Minute

// Effective resolves what one recipient gets for one type, in this order:
//
//   - the override's mode, window, max wait and lead replace the type's
//     where they are set (an empty or unknown mode, a nil or non-positive
//     window and a nil max wait are "not set");
//   - unsubscribed turns every type that is not required into Never;
//   - a required type never resolves to Never: it falls back to the type's
//     default mode, or Immediate if that is Never too, because a security
//     alert must reach the person;
//   - a type mode that is empty or unknown reads as Immediate, the default
//     a type gets when saved without one, so the result is always a valid
//     mode;
//   - in Cooldown a zero window falls back to the type's window (and, if
//     that is zero too, to five minutes), since a zero window would close
//     each batch as it opens; a negative max wait reads as no cap.
//
// The rules are checked again at flush with the settings as they are then,
// so a recipient who mutes a type cancels what is already waiting.
func Effective(t TypeDefaults, o *Override, unsubscribed bool) Policy {
	typeMode := t.Mode
	if !typeMode.valid() {
		typeMode = Immediate
	}
	p := Policy{Mode: typeMode, Window: t.Window, MaxWait: t.MaxWait, Lead: t.Lead}
	if o != nil {
		if o.Mode.valid() {
			p.Mode = o.Mode
		}
		if o.Window != nil && *o.Window > 0 {
			p.Window = *o.Window
		}
		if o.MaxWait != nil {
			p.MaxWait = *o.MaxWait
		}
		if o.Lead != nil {
			p.Lead = *o.Lead
		}
	}
	if unsubscribed && !t.Required {
		p.Mode = Never
	}
	if t.Required && p.Mode == Never {
		p.Mode = typeMode
		if p.Mode == Never {
			p.Mode = Immediate
		}
	}
	if p.Mode == Cooldown && p.Window <= 0 {
		// The override's window only replaces a positive type window, so
		// here neither gave one.
		p.Window = defaultWindow
	}
	if p.MaxWait < 0 {
		p.MaxWait = 0
	}
	return p
}
