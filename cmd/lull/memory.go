package main

import "runtime/debug"

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

// setMemoryLimit applies defaultMemoryLimit when GOMEMLIMIT is unset; Go
// itself has already applied GOMEMLIMIT when it is set.
func setMemoryLimit(getenv func(string) string) {
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}
