package batching

import (
	"errors"
	"sync"
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
	loc := Location(r.Timezone)
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

// zones caches loaded time zones: time.LoadLocation reads the zone file
// on every call, and a fan-out asks once per recipient. Zones never change
// while the process runs, so the cache needs no invalidation.
var zones sync.Map

// Location returns the named IANA zone, or UTC for an unknown name.
func Location(name string) *time.Location {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location)
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "" || name == "Local" {
		loc = time.UTC
	}
	zones.Store(name, loc)
	return loc
}

func isNotFound(err error) bool { return errors.Is(err, db.ErrNotFound) }
