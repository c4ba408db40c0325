package preferences

import "time"

// RouteHistory is what routing needs to know about one recipient's recent
// past under one type and event batch key: how many immediate emails of
// the type they got in the last minute (the burst guard's measure), and,
// under the type's cooldown batch key (BatchKey(Cooldown, ...)), whether a
// batch is open to join and when a notification last arrived. The engine
// reads it from the batches table; the simulator keeps it in memory.
type RouteHistory struct {
	// RecentImmediate counts immediate batches of the type opened in the
	// minute before now (strictly after now - 1m).
	RecentImmediate int
	// HasOpen is true while a batch that is not immediate is open under
	// the cooldown key.
	HasOpen bool
	// Last is when a notification last joined any batch under the
	// cooldown key, immediate ones included; zero if none ever did.
	Last time.Time
}

// NeedsHistory reports whether Route can depend on the history for policy
// p, so callers look it up only for the recipients where it matters: an
// Immediate policy under an active burst guard, and a leading Cooldown.
func NeedsHistory(p Policy, burstLimit int) bool {
	return (p.Mode == Immediate && burstLimit > 0) || (p.Mode == Cooldown && p.Lead)
}

// Route is the policy a notification is actually batched under, after the
// rules that look at the recipient's recent past:
//
//   - the burst guard: an Immediate notification goes into BurstPolicy
//     when the recipient already got burstLimit immediate emails of the
//     type within a minute (Bursting), or while such a burst batch is
//     still open, so the rest of a flood joins it;
//   - the leading item: a Cooldown notification with Lead goes out at once
//     (as Immediate) when it is the first of a quiet period (LeadsNow).
//
// Every other policy comes back unchanged. p is the recipient's Effective
// policy; the result decides the batch key and the close time.
func Route(p Policy, burstLimit int, h RouteHistory, now time.Time) Policy {
	switch {
	case p.Mode == Immediate && burstLimit > 0 && (Bursting(h.RecentImmediate, burstLimit) || h.HasOpen):
		return BurstPolicy
	case LeadsNow(p, h.HasOpen, h.Last, now):
		return Policy{Mode: Immediate}
	}
	return p
}

// SettleClose is when a batch closes after a notification joined it at
// now: CloseTime from the batch's own policy (the one it was opened with,
// which a later event does not change), its opening and its latest event;
// except that a Cooldown batch holding maxItems or more closes at once, so
// a flood is cut into emails of at most maxItems. maxItems <= 0 means no
// limit. Digests have no item limit: they gather a period by design.
func SettleClose(p Policy, s Schedule, opened, last, now time.Time, items, maxItems int) time.Time {
	if maxItems > 0 && p.Mode == Cooldown && items >= maxItems {
		return now
	}
	return CloseTime(p, s, opened, last)
}
