package web

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
)

// MuteBody is one muted conversation in the preferences API: until when
// (null: until turned back on).
type MuteBody struct {
	Until *time.Time `json:"until"`
}

// mutePatches are the changes to a recipient's muted conversations, by
// batch key ("comment.created+document:7"): a value mutes (again, with
// its new end), null turns one back on.
type mutePatches map[string]Optional[MuteBody]

// maxMutes bounds the conversations one request may change, and
// maxMuteAhead how far ahead a mute may end: longer is "for good", which
// a mute without until says plainly.
const (
	maxMutes     = 100
	maxMuteAhead = 366 * 24 * time.Hour
)

// checkMutes refuses what a mute cannot be: a key that is no
// conversation of a registered type, a required type's conversation, an
// end that has passed or is more than a year away.
func checkMutes(p Optional[mutePatches], types []db.Type, now time.Time) []FieldError {
	if len(p.Value) > maxMutes {
		return []FieldError{{"muted", "changes more than 100 conversations; send the rest in another request"}}
	}
	required := map[string]bool{}
	for _, t := range types {
		required[t.Key] = t.Required
	}
	var errs []FieldError
	for _, k := range slices.Sorted(maps.Keys(p.Value)) {
		o, field := p.Value[k], "muted."+k
		typ, ok := db.ThreadType(k)
		isRequired, known := required[typ]
		switch {
		case o.Null:
		case !ok || !known:
			errs = append(errs, FieldError{field, "is not a conversation: use a registered type's key, \"+\" and the events' batch_key (\"comment.created+document:7\")"})
		case isRequired:
			errs = append(errs, FieldError{field, "is a conversation of a required type, which cannot be muted"})
		case o.Value.Until != nil && !o.Value.Until.After(now):
			errs = append(errs, FieldError{field + ".until", "has passed; leave it out to mute until turned back on"})
		case o.Value.Until != nil && o.Value.Until.Sub(now) > maxMuteAhead:
			errs = append(errs, FieldError{field + ".until", "is more than a year away; leave it out to mute until turned back on"})
		}
	}
	return errs
}

// applyMutes writes checked mute changes inside the preferences' write,
// and refuses them (rolling the write back) when they would leave more
// than db.MaxMutes conversations muted and more than before: past that
// the answer, which lists them all, would no longer. Mutes made by the
// links in emails are never refused (an unsubscribe must be honoured),
// so a recipient may be past the cap already; a change that leaves fewer
// muted, or as many, is then still taken.
func applyMutes(ctx context.Context, tx pgx.Tx, id string, p Optional[mutePatches]) error {
	if p.Null {
		return db.UnmuteAll(ctx, tx, id)
	}
	if len(p.Value) == 0 {
		return nil
	}
	before, err := db.LiveMuteCount(ctx, tx, id)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(p.Value)) {
		var err error
		switch o := p.Value[k]; {
		case o.Null:
			err = db.UndoUnsubscribe(ctx, tx, id, db.Undo{Thread: k})
		case o.Value.Until != nil:
			err = db.MuteThreadUntil(ctx, tx, id, k, *o.Value.Until)
		default:
			_, _, err = db.MuteThreadFor(ctx, tx, id, k, 0)
		}
		if err != nil {
			return err
		}
	}
	n, err := db.LiveMuteCount(ctx, tx, id)
	if err == nil && n > db.MaxMutes && n > before {
		err = Invalid(FieldError{"muted", fmt.Sprintf("would mute %d conversations; at most %d may be muted at once: turn some back on first", n, db.MaxMutes)})
	}
	return err
}

// mutedBody lists the conversations a recipient has muted now.
func (s *Server) mutedBody(ctx context.Context, id string) (map[string]MuteBody, error) {
	threads, err := db.MutedThreads(ctx, s.DB.Pool, id, db.MaxMutes)
	if err != nil {
		return nil, err
	}
	out := make(map[string]MuteBody, len(threads))
	for _, th := range threads {
		out[th.BatchKey] = MuteBody{Until: th.Until}
	}
	return out, nil
}
