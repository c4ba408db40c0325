package batching

import (
	"slices"
	"time"

	"github.com/lull-dev/lull/db"
)

// A fan-out does not give each batch it opens a flush job of its own: for
// 100,000 new batches that was 100,000 River jobs written in the request,
// a quarter of its time. It schedules wakes instead, a few small jobs that
// write those flush jobs shortly before the batches close. Each batch
// still gets its own flush job, with its retries and ownership; only
// later, and outside the request.
//
// A wake finds its batches again by what the fan-out gave them: an id
// between the first and the last it opened, and its instant as opened_at.
// It does not go through the event's notifications, so a retraction that
// leaves a batch holding other events' notifications cannot hide it, and
// it finds only the batches the fan-out opened, not the ones it joined,
// which have their own jobs (or their own wakes).
//
// The fan-out's close times are cut into ranges, one wake each: the wake
// at At takes every open batch of the fan-out closing before Until (the
// next wake's At; the last wake has none) and gives it a flush job at its
// close time as it is then. A close time only moves later on its own (a
// cool-down slides); whatever moves it earlier (a full batch, new quiet
// hours) schedules a flush itself. So a batch is never stranded: if its
// close slid past its wake's range before that wake ran, a later wake,
// whose range holds the new time, takes it; if it slid after its wake ran,
// its job wakes early and snoozes until the new time.

// wakeFrom is how many recipients make an event a fan-out whose new
// batches are scheduled by wakes. Below it a wake would save little
// (an INSERT of a hundred small rows) and cost a job run later.
const wakeFrom = 100

// maxWakes bounds the wakes of one fan-out. Close times spread over more
// seconds than that (every recipient with a window of their own, say) are
// taken in coarser ranges: a wake whose range is wider inserts some flush
// jobs earlier, which changes nothing about when they run.
const maxWakes = 100

// Wake asks for a flush job at its close time for every batch that is
// still open, has an id in [First, Last], was opened at OpenedAt and
// closes before Until (whenever it closes, when Until is zero). At is when
// the first of them closes; the scheduler runs the wake shortly before.
type Wake struct {
	First, Last int64
	OpenedAt    time.Time
	At          time.Time
	Until       time.Time
}

// wakeSet gathers the batches one fan-out opened, across its chunks.
type wakeSet struct {
	first, last int64
	opened      time.Time
	seconds     map[int64]bool // close times, in Unix seconds
}

// add takes a batch the fan-out opened, closing at closes.
func (w *wakeSet) add(b *db.JoinedBatch, closes time.Time) {
	if w.seconds == nil {
		w.seconds = map[int64]bool{}
		w.first, w.last, w.opened = b.ID, b.ID, b.OpenedAt
	}
	w.first, w.last = min(w.first, b.ID), max(w.last, b.ID)
	w.seconds[closes.Unix()] = true
}

// wakes cuts the close times into at most maxWakes ranges, earliest
// first; the first starts at the earliest close.
func (w *wakeSet) wakes() []Wake {
	if w == nil || len(w.seconds) == 0 {
		return nil
	}
	secs := make([]int64, 0, len(w.seconds))
	for s := range w.seconds {
		secs = append(secs, s)
	}
	slices.Sort(secs)
	step := (len(secs) + maxWakes - 1) / maxWakes
	var out []Wake
	for i := 0; i < len(secs); i += step {
		wk := Wake{First: w.first, Last: w.last, OpenedAt: w.opened, At: time.Unix(secs[i], 0).UTC()}
		if next := i + step; next < len(secs) {
			wk.Until = time.Unix(secs[next], 0).UTC()
		}
		out = append(out, wk)
	}
	return out
}
