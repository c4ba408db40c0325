package jobs_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs"
)

// setBudget stores a recipient's own daily email budget.
func (b *testBundle) setBudget(t *testing.T, rid string, n int) {
	t.Helper()
	if _, err := b.db.Pool.Exec(context.Background(), `UPDATE recipients SET daily_budget = $2 WHERE id = $1`, rid, n); err != nil {
		t.Fatal(err)
	}
}

// heldItems is how many notifications the skip log says were held by the
// budget for rid, and the batches it says they were folded into.
func (b *testBundle) heldItems(t *testing.T, rid string) (int, map[string]bool) {
	t.Helper()
	skips, err := db.ListSkips(context.Background(), b.db.Pool, 0, rid, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n, into := 0, map[string]bool{}
	for _, s := range skips {
		if strings.HasPrefix(s.Reason, db.SkipHeldByBudget+": folded into batch ") {
			n += s.Items
			into[strings.TrimPrefix(s.Reason, db.SkipHeldByBudget+": folded into batch ")] = true
		}
	}
	return n, into
}

// TestBudgetOfThreeHoldsTheRestForTheNextDay is the promise over
// real SMTP: with a budget of 3 a day, 50 events of 5 types give 3 emails
// that day, every other notification is in the skip log as held and
// folded into one digest, and that digest goes out at the next day's
// digest time carrying all of them.
func TestBudgetOfThreeHoldsTheRestForTheNextDay(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	types := []string{"comment", "share", "mention", "task", "invite"}
	for _, k := range types {
		b.saveType(t, db.Type{Key: k, DefaultMode: "immediate"})
	}
	b.setBudget(t, "bob", 3)
	b.clock.Set(time.Date(2026, 11, 23, 0, 30, 0, 0, time.UTC))
	for i := range 50 {
		b.post(t, types[i%5], "alice", "bob")
		b.flushDue(t)
		b.clock.Advance(20 * time.Minute) // 50 events from 00:30 to 17:10
	}
	if got := len(srv.Messages()); got != 3 {
		t.Fatalf("%d emails on the day, want 3 (the budget)", got)
	}
	held, into := b.heldItems(t, "bob")
	if held != 47 || len(into) != 1 {
		t.Fatalf("skip log holds %d notifications folded into %v, want 47 into one batch", held, into)
	}
	var heldID int64
	var closes time.Time
	if err := b.db.Pool.QueryRow(context.Background(),
		`SELECT id, closes_at FROM batches WHERE recipient_id = 'bob' AND batch_key = 'budget:held' AND state = 'open'`).Scan(&heldID, &closes); err != nil {
		t.Fatal(err)
	}
	if !into[itoa(heldID)] {
		t.Fatalf("skip log names batches %v, the held digest is %d", into, heldID)
	}
	if want := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC); !closes.Equal(want) {
		t.Fatalf("held digest closes %v, want the next day's digest time %v", closes, want)
	}
	b.clock.Set(closes)
	b.flushDue(t)
	msgs := srv.Messages()
	if len(msgs) != 4 {
		t.Fatalf("%d emails after the next digest time, want the 3 and the held digest", len(msgs))
	}
	if n := b.count(t, `SELECT count(*) FROM notifications n JOIN batches b ON b.id = n.batch_id WHERE n.recipient_id = 'bob' AND b.state = 'sent'`); n != 50 {
		t.Fatalf("%d of 50 notifications went out in an email", n)
	}
	if got := b.batch(t, heldID).ItemCount; got != 47 {
		t.Fatalf("held digest sent %d items, want 47", got)
	}
}

// TestBudgetNeverHoldsARequiredType: required types are not counted and
// not held, also when they share a digest with types that are.
func TestBudgetNeverHoldsARequiredType(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	b.saveType(t, db.Type{Key: "security", DefaultMode: "immediate", Required: true})
	b.saveType(t, db.Type{Key: "digestible", DefaultMode: "daily"})
	b.saveType(t, db.Type{Key: "security.daily", DefaultMode: "daily", Required: true})
	b.setBudget(t, "bob", 1)
	b.post(t, "alert", "system", "bob") // the one email of the day
	b.flushDue(t)
	for range 3 {
		b.post(t, "security", "system", "bob")
	}
	b.post(t, "digestible", "system", "bob")
	b.post(t, "security.daily", "system", "bob")
	b.flushDue(t)
	if got := len(srv.Messages()); got != 4 {
		t.Fatalf("%d emails, want the alert and 3 security alerts", got)
	}
	// The next day's one email goes out before the daily digest, which
	// then sends its required type and holds the other.
	b.clock.Set(time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC))
	b.post(t, "alert", "system", "bob")
	b.flushDue(t)
	b.clock.Set(time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC))
	b.flushDue(t)
	msgs := srv.Messages()
	if len(msgs) != 6 {
		t.Fatalf("%d emails, want 5 and the digest with the required type", len(msgs))
	}
	if text := string(msgs[5].Data); !strings.Contains(text, "security.daily") || strings.Contains(text, "digestible") {
		t.Fatalf("the digest should show the required type alone:\n%s", text)
	}
	held, _ := b.heldItems(t, "bob")
	if held != 1 {
		t.Fatalf("%d notifications held, want only the one not required", held)
	}
	if n := b.count(t, `SELECT count(*) FROM notifications n JOIN batches b ON b.id = n.batch_id WHERE n.recipient_id = 'bob' AND b.state = 'sent'`); n != 6 {
		t.Fatalf("%d of 6 required or within-budget notifications sent", n)
	}
}

// TestBudgetHoldsAgainstConcurrentFlushes: flushes of one recipient
// racing each other in several processes (each its own worker, so its own
// transactions) send no more than the budget; the rest are folded.
func TestBudgetHoldsAgainstConcurrentFlushes(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	workers := []*jobs.FlushWorker{b.flush}
	for range 5 {
		f := b.flush
		workers = append(workers, &jobs.FlushWorker{DB: f.DB, Sender: f.Sender, From: f.From, Links: f.Links, Logger: f.Logger, Now: f.Now})
	}
	const recipients, each = 4, 12
	for r := range recipients {
		rid := "r" + itoa(int64(r))
		b.recipient(t, rid, "UTC")
		b.setBudget(t, rid, 2)
	}
	var ids []int64
	for range each {
		for r := range recipients {
			ids = append(ids, b.post(t, "alert", "system", "r"+itoa(int64(r))).Batches[0].ID)
		}
	}
	var wg sync.WaitGroup
	for i, id := range ids {
		w := workers[i%len(workers)]
		wg.Go(func() {
			job := &river.Job[jobs.FlushArgs]{
				JobRow: &rivertype.JobRow{ID: int64(100 + i), Attempt: 1, MaxAttempts: 8, Kind: "flush_batch"},
				Args:   jobs.FlushArgs{BatchID: id},
			}
			if err := w.Work(context.Background(), job); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	perRecipient := map[string]int{}
	for _, m := range srv.Messages() {
		perRecipient[m.To[0]]++
	}
	for r := range recipients {
		rid := "r" + itoa(int64(r))
		if got := perRecipient[rid+"@example.com"]; got != 2 {
			t.Errorf("%s got %d emails from %d racing flushes, want 2 (the budget)", rid, got, each)
		}
		if held, _ := b.heldItems(t, rid); held != each-2 {
			t.Errorf("%s: %d notifications held, want %d", rid, held, each-2)
		}
	}
}

// TestHeldDigestOpensTheNextDay: the held digest goes out at the next
// day's digest time in the recipient's zone and is that day's first
// email, so with a budget of one what follows it that day is held again.
func TestHeldDigestOpensTheNextDay(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	b.recipient(t, "bob", "America/New_York")
	b.setBudget(t, "bob", 1)
	// 23:00 in New York on 22 Nov: that day's email, then one held.
	b.clock.Set(time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC))
	b.post(t, "alert", "system", "bob")
	b.post(t, "alert", "system", "bob")
	b.flushDue(t)
	// 00:30 in New York, 23 Nov: a new day, but the held digest is due
	// at 08:00 and spoken for, so this one joins it.
	b.clock.Advance(90 * time.Minute)
	b.post(t, "alert", "system", "bob")
	b.flushDue(t)
	if got := len(srv.Messages()); got != 1 {
		t.Fatalf("%d emails before the digest time, want 1", got)
	}
	b.clock.Set(time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC)) // 08:00 New York
	b.flushDue(t)
	if got := len(srv.Messages()); got != 2 {
		t.Fatalf("%d emails at the digest time, want the held digest too", got)
	}
	b.post(t, "alert", "system", "bob")
	b.flushDue(t)
	if got := len(srv.Messages()); got != 2 {
		t.Fatalf("%d emails, want the day's budget kept after the held digest", got)
	}
	var closes time.Time
	if err := b.db.Pool.QueryRow(context.Background(),
		`SELECT closes_at FROM batches WHERE recipient_id = 'bob' AND batch_key = 'budget:held' AND state = 'open'`).Scan(&closes); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC); !closes.Equal(want) {
		t.Fatalf("the next held digest closes %v, want %v", closes, want)
	}
}

// TestNoBudgetSendsEverything: a budget of 0 (the default) holds nothing.
func TestNoBudgetSendsEverything(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	b.flush.DailyBudget = 2
	b.setBudget(t, "bob", 0) // the recipient's own choice wins: no limit
	for range 5 {
		b.post(t, "alert", "system", "bob")
	}
	b.flushDue(t)
	if got := len(srv.Messages()); got != 5 {
		t.Fatalf("%d emails, want all 5", got)
	}
}
