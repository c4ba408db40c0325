package main

import (
	"math"
	"runtime/debug"
)

// defaultMemoryLimit is the soft memory limit lull gives Go's garbage
// collector unless GOMEMLIMIT sets one. Without a limit the collector
// lets the heap grow to twice what is live before it collects, and a
// 100,000-recipient inline fan-out (60–70 MB live while its request is
// decoded and written) then took lull to 150–175 MB of RSS; with the
// limit the collector runs sooner as the heap nears it. It is soft: a
// heap that truly needs more gets it, at the cost of collecting more
// often (Go caps that at half the CPU). GOMEMLIMIT=off restores Go's
// default, and a larger GOMEMLIMIT suits a process that runs several
// such fan-outs at once.
const defaultMemoryLimit = 100 << 20

// limitedGCPercent is the collector's growth target (GOGC) while a
// memory limit holds the heap: it collects when the heap reaches five
// times what is live or the limit, whichever comes first. Go's 100
// collected every few milliseconds in a flush wave, whose live heap is
// small but churns through every email's rendering: a fifth of lull's
// CPU went to the collector and its write barriers. With 400 and the
// limit, a flush wave costs lull a fifth less CPU per digest and its
// memory still stays under the limit.
const limitedGCPercent = 400

// setMemoryLimit applies defaultMemoryLimit when GOMEMLIMIT is unset (Go
// itself has already applied GOMEMLIMIT when it is set), then, when some
// limit is in force and GOGC is unset, limitedGCPercent. Without a limit
// GOGC stays Go's 100, since 400 would then let the heap grow to five
// times what is live.
func setMemoryLimit(getenv func(string) string) {
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	if getenv("GOGC") == "" && debug.SetMemoryLimit(-1) != math.MaxInt64 {
		debug.SetGCPercent(limitedGCPercent)
	}
}
