package preferences

import (
	"sync"
	"time"
)

// zones caches loaded time zones: time.LoadLocation reads the zone file
// on every call, and a fan-out asks once per recipient, a flush once per
// email. Zones never change while the process runs, so the cache needs no
// invalidation.
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
