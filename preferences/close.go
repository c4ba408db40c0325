package preferences

import "time"

// CooldownCloses is when a cooldown batch closes:
// min(last + window, opened + maxWait), with maxWait <= 0 meaning no cap.
// Each new event moves last and so slides the close time; the cap keeps a
// steady trickle from holding a batch forever. With maxWait <= window the
// cap always wins (last is never before opened), which is how "M = W gives
// a fixed window" falls out of the same formula.
func CooldownCloses(opened, last time.Time, window, maxWait time.Duration) time.Time {
	at := last.Add(window)
	if maxWait > 0 {
		if capped := opened.Add(maxWait); capped.Before(at) {
			at = capped
		}
	}
	return at
}

// CloseTime is when a batch under policy p, opened at opened and last
// joined at last, closes. It is the one answer to that question: ingest
// sets closes_at from it and every later event recomputes it.
//
//   - Immediate: at last, the notification's own time.
//   - Cooldown: CooldownCloses(opened, last, p.Window, p.MaxWait).
//   - Daily: NextDaily(opened), the first digest after the batch opened,
//     however many events join it later.
//   - Weekly: NextWeekly(opened), the next of the recipient's weekly days.
//   - Hourly: NextHourly(opened); Monthly: NextMonthly(opened).
//
// Quiet hours then apply (AfterQuiet): a batch due inside them closes when
// they end. Never has no batch; CloseTime returns last unchanged for it,
// and an unknown mode is treated as Immediate.
func CloseTime(p Policy, s Schedule, opened, last time.Time) time.Time {
	var at time.Time
	switch p.Mode {
	case Never:
		return last
	case Cooldown:
		at = CooldownCloses(opened, last, p.Window, p.MaxWait)
	case Daily:
		at = NextDaily(opened, s)
	case Weekly:
		at = NextWeekly(opened, s)
	case Hourly:
		at = NextHourly(opened, s)
	case Monthly:
		at = NextMonthly(opened, s)
	default:
		at = last
	}
	return AfterQuiet(at, s)
}

// The batch keys of the two digests: one open digest per recipient per
// period holds every type in that mode.
const (
	dailyKey   = "digest:daily"
	weeklyKey  = "digest:weekly"
	hourlyKey  = "digest:hourly"
	monthlyKey = "digest:monthly"
)

// BatchKey names the batch a notification joins for its recipient. In
// Immediate and Cooldown a batch holds one type, split further by the
// event's optional batch key: "comment.created", or
// "comment.created+document:7" so comments on two documents are two
// emails. The digests (Hourly, Daily, Weekly, Monthly) use "digest:daily"
// and so on, one per recipient, so a digest gathers every type. Never stores no batch; it
// gets the per-type key so a caller logging it still has a useful name.
func BatchKey(m Mode, typeKey, eventKey string) string {
	switch m {
	case Daily:
		return dailyKey
	case Weekly:
		return weeklyKey
	case Hourly:
		return hourlyKey
	case Monthly:
		return monthlyKey
	}
	if eventKey == "" {
		return typeKey
	}
	return typeKey + "+" + eventKey
}

// BurstPolicy is the short cooldown an Immediate flood falls into once
// Bursting says so: one minute of quiet closes it and no one waits more
// than five, so the rest of the flood arrives as one email within minutes
// instead of dozens. Treat it as a constant; Go has no constant structs.
var BurstPolicy = Policy{Mode: Cooldown, Window: time.Minute, MaxWait: 5 * time.Minute}

// Bursting reports whether sentLastMinute immediate emails of one type to
// one recipient already reach limit, so the next one should go into
// BurstPolicy instead of out on its own. limit <= 0 turns the guard off,
// for types where every email matters on its own.
func Bursting(sentLastMinute, limit int) bool {
	return limit > 0 && sentLastMinute >= limit
}

// LeadsNow reports whether, under Cooldown with Lead, a notification is the
// first of a quiet period and so goes out at once rather than waiting a
// window: no batch is open for it, and nothing arrived within p.Window
// before now (lastActivity is zero when nothing ever did). An event exactly
// one window after the last one leads, matching a cooldown batch that
// closes at exactly last + window. Other modes and policies without Lead
// never lead.
func LeadsNow(p Policy, hasOpen bool, lastActivity, now time.Time) bool {
	if p.Mode != Cooldown || !p.Lead || hasOpen {
		return false
	}
	return lastActivity.IsZero() || !now.Before(lastActivity.Add(p.Window))
}
