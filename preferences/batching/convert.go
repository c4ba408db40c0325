package batching

import (
	"errors"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
)

// TypeDefaults is a stored type's settings as the rules see them.
func TypeDefaults(t *db.Type) preferences.TypeDefaults {
	return preferences.TypeDefaults{
		Required: t.Required,
		Mode:     preferences.Mode(t.DefaultMode),
		Window:   t.Window(),
		MaxWait:  t.MaxWait(),
		Lead:     t.Lead,
	}
}

// Override is a stored preference as the rules see it; nil stays nil.
func Override(p *db.TypePreference) *preferences.Override {
	if p == nil {
		return nil
	}
	o := &preferences.Override{Mode: preferences.Mode(p.Mode), Lead: p.Lead}
	if p.WindowMS != nil {
		d := time.Duration(*p.WindowMS) * time.Millisecond
		o.Window = &d
	}
	if p.MaxWaitMS != nil {
		d := time.Duration(*p.MaxWaitMS) * time.Millisecond
		o.MaxWait = &d
	}
	return o
}

// Schedule is a recipient's calendar as the rules see it. An unknown zone
// (which validation keeps out) falls back to UTC rather than failing a flush.
func Schedule(r *db.Recipient) preferences.Schedule {
	loc := preferences.Location(r.Timezone)
	s := preferences.Schedule{
		Location: loc,
		DailyAt:  preferences.TimeOfDay(r.DailyAt),
		WeeklyOn: time.Weekday(r.WeeklyOn),
		WeeklyAt: preferences.TimeOfDay(r.WeeklyAt),
	}
	if r.QuietStart != nil && r.QuietEnd != nil {
		s.Quiet = preferences.QuietHours{Start: preferences.TimeOfDay(*r.QuietStart), End: preferences.TimeOfDay(*r.QuietEnd), Enabled: true}
	}
	return s
}

func isNotFound(err error) bool { return errors.Is(err, db.ErrNotFound) }
