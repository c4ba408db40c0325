package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/db/localpg"
	"github.com/lull-dev/lull/mail/smtptest"
)

// The fault tests of docs/reliability.md. Each runs real lull processes
// (this test binary re-executed as "lull serve") against a real
// PostgreSQL and, where mail matters, a real SMTP server on loopback, then
// breaks something the way production breaks: SIGKILL, a database
// restart, several processes racing for the same work.

// TestKillDuringIngestLosesNoAcknowledgedEvent kills lull with SIGKILL
// while eight clients post events and batches flush, restarts it, and
// lets the clients retry what got no answer, with the same idempotency
// keys. Every event acknowledged with 202 must be stored once under the
// id lull gave, with a notification per recipient in a batch, and end up
// in the email its batch sent; every retried key must be stored once
// (whether or not the killed process had committed it); no batch may be
// left with an item count that disagrees with its notifications.
func TestKillDuringIngestLosesNoAcknowledgedEvent(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	env := faultEnv(dbURL, nil)
	a := startProcess(t, env)
	a.post(t, "/api/v1/types/ingest", faultAPIKey, cooldownType)
	load := newLoad("ingest", 40, 3, a.base)
	// 150 events a second to 3 of 40 recipients keeps every batch under
	// the 100 items an email lists.
	stop := load.start(8, 150)
	// Kill once flushes run alongside the ingest, so the kill can land in
	// either.
	waitUntil(t, 60*time.Second, "300 acknowledged events and 60 emails", func() bool {
		return load.ackedCount() >= 300 && queryInt(t, dbURL, "SELECT count(*) FROM outbox") >= 60
	})
	// Aim the kill at a moment when requests are in progress.
	for deadline := time.Now().Add(5 * time.Second); load.inFlight.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	killedAt := time.Now()
	a.kill(t)
	stop()
	flushingAtKill := int64Set(t, dbURL, "SELECT id FROM batches WHERE state = 'flushing'")
	var inFlight []string
	for _, r := range load.log() {
		switch {
		case r.status == 0 && r.start.Before(killedAt):
			inFlight = append(inFlight, r.key)
		case r.status != 0 && r.status != http.StatusAccepted:
			t.Errorf("%s answered %d %q before the kill", r.key, r.status, r.problem)
		}
	}
	committed := len(stored(t, dbURL, inFlight))
	acked := load.ackedCount()

	b := startProcess(t, env)
	retried := load.retryPending(t, b.base)
	waitDrained(t, dbURL, 60*time.Second)
	load.checkAcknowledged(t, dbURL, "sent")
	checkConsistentCounts(t, dbURL)
	if n := queryInt(t, dbURL, "SELECT count(*) FROM (SELECT key FROM events GROUP BY key HAVING count(*) > 1) d"); n != 0 {
		t.Errorf("%d keys are stored more than once", n)
	}

	// The outbox holds every email with its text: each acknowledged event
	// must be listed in an email of its batch, and only a batch that was
	// being flushed at the kill may have gone out twice.
	texts := map[int64][]string{}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT batch_id, text_body FROM outbox")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			t.Fatal(err)
		}
		texts[id] = append(texts[id], text)
	}
	dupes := 0
	for id, ts := range texts {
		if len(ts) > 1 {
			dupes++
			if !flushingAtKill[id] {
				t.Errorf("batch %d was emailed %d times but was not being flushed at the kill", id, len(ts))
			}
		}
	}
	if n := queryInt(t, dbURL, "SELECT count(*) FROM batches WHERE item_count > 100"); n != 0 {
		t.Fatalf("%d batches hold more items than an email lists; the load is too heavy for this check", n)
	}
	keys := load.ackedKeys()
	got := stored(t, dbURL, mapKeys(keys))
	missing := 0
	for key, e := range got {
		for r, bs := range e.batches {
			ts := texts[bs.id]
			if len(ts) == 0 || !strings.Contains(ts[0], key) {
				if missing++; missing <= 10 {
					t.Errorf("event %s for %s is not in the email of batch %d", key, r, bs.id)
				}
			}
		}
	}
	t.Logf("kill during ingest: %d events acknowledged before the kill, %d in flight at the kill (%d of them committed), %d retried after the restart; all %d stored once and delivered in %d emails; %d emails sent twice (batches in flight at the kill: %d)",
		acked, len(inFlight), committed, retried, len(keys), len(texts), dupes, len(flushingAtKill))
}

// TestKillDuringFlushWave kills lull with SIGKILL while 300 batches that
// closed together are being sent to a slow SMTP server, and restarts it.
// Every batch must end up delivered. With at-least-once delivery, only a
// batch whose send was in flight at the kill may arrive twice (the server
// took it, lull never heard); with at-most-once, none arrives twice, and
// every batch that did not arrive is listed as possibly lost.
func TestKillDuringFlushWave(t *testing.T) {
	t.Parallel()
	t.Run("AtLeastOnce", func(t *testing.T) { t.Parallel(); killDuringFlushWave(t, false) })
	t.Run("AtMostOnce", func(t *testing.T) { t.Parallel(); killDuringFlushWave(t, true) })
}

func killDuringFlushWave(t *testing.T, atMostOnce bool) {
	const n = 300
	smtp := smtptest.Start(t, smtptest.KeepAll())
	smtp.SetDelay(20 * time.Millisecond)
	dbURL := dbtest.NewURL(t)
	env := faultEnv(dbURL, smtp)
	if atMostOnce {
		env["LULL_DELIVERY"] = "at-most-once"
	}
	a := startProcess(t, env)
	a.post(t, "/api/v1/types/wave", faultAPIKey, `{"default_mode":"cooldown","window":"2s","max_wait":"2s"}`)
	load := newLoad("wave", n, n, a.base)
	if r := load.post(context.Background(), a.base, 1); r.status != http.StatusAccepted {
		t.Fatalf("posting the wave: %d %s", r.status, r.problem)
	}
	waitUntil(t, 60*time.Second, "a third of the wave to be sent", func() bool { return smtp.Received() >= n/3 })
	a.kill(t)
	sentAtKill := smtp.Received()
	// Let the server finish answering what it had taken in.
	time.Sleep(200 * time.Millisecond)
	inFlight := int64Set(t, dbURL, "SELECT id FROM batches WHERE state = 'flushing'")
	if atMostOnce {
		inFlight = int64Set(t, dbURL, "SELECT batch_id FROM deliveries WHERE state = 'sent' AND NOT confirmed")
	}

	b := startProcess(t, env)
	waitDrained(t, dbURL, 60*time.Second)
	if atMostOnce {
		waitUntil(t, 30*time.Second, "every unconfirmed send to be flagged", func() bool {
			return queryInt(t, dbURL, "SELECT count(*) FROM deliveries WHERE state = 'sent' AND NOT confirmed AND NOT possibly_lost") == 0
		})
	}
	all := int64Set(t, dbURL, "SELECT id FROM batches")
	if len(all) != n {
		t.Fatalf("%d batches, want %d", len(all), n)
	}
	if got := queryInt(t, dbURL, "SELECT count(*) FROM batches WHERE state = 'sent'"); got != n {
		t.Errorf("%d of %d batches sent", got, n)
	}
	counts := smtp.BatchCounts()
	lost := int64Set(t, dbURL, "SELECT batch_id FROM deliveries WHERE possibly_lost")
	var dupes, missing []int64
	for id := range all {
		switch c := counts[id]; {
		case c > 1:
			dupes = append(dupes, id)
			if atMostOnce || !inFlight[id] {
				t.Errorf("batch %d arrived %d times; it was not in flight at the kill, or delivery is at-most-once", id, c)
			}
		case c == 0:
			missing = append(missing, id)
			if !lost[id] {
				t.Errorf("batch %d never arrived and is not listed as possibly lost", id)
			}
		}
	}
	for id := range lost {
		if !atMostOnce || !inFlight[id] {
			t.Errorf("batch %d is flagged possibly lost but was not an at-most-once send in flight at the kill", id)
		}
	}
	checkProcessLog(t, b)
	t.Logf("kill during a flush wave (at-most-once %v): %d batches due, %d emails received before the kill, %d sends in flight; after the restart %d delivered, %d twice %v, %d possibly lost %v (never arrived: %d)",
		atMostOnce, n, sentAtKill, len(inFlight), len(counts), len(dupes), dupes, len(lost), sortedIDs(lost), len(missing))
}

// TestPostgresRestartUnderLoad stops the database under a lull taking a
// steady stream of events and flushing them, and starts it again. lull
// must keep running; /readyz must answer 503 while the database is down
// and 200 after; every request must get an answer quickly, 202 or (during
// the outage) a 503 problem+json, never a hang or a 500; and once the
// clients have retried what was refused, every acknowledged event must be
// delivered.
func TestPostgresRestartUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("lull-pgrestart-%d", time.Now().UnixNano()))
	cluster, err := localpg.Ensure(ctx, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop(ctx); os.RemoveAll(dir) })
	if err := createDatabase(ctx, cluster.URL("postgres"), "lull"); err != nil {
		t.Fatal(err)
	}
	dbURL := cluster.URL("lull")
	smtp := smtptest.Start(t, smtptest.KeepAll())
	p := startProcess(t, faultEnv(dbURL, smtp))
	p.post(t, "/api/v1/types/restart", faultAPIKey, cooldownType)
	load := newLoad("restart", 30, 2, p.base)
	stop := load.start(4, 100)
	time.Sleep(2 * time.Second)

	downAt := time.Now()
	if err := cluster.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		start := time.Now()
		if got := status(t, p.base+"/readyz"); got != http.StatusServiceUnavailable {
			t.Errorf("readyz = %d with the database down, want 503", got)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("readyz took %v with the database down", took)
		}
		time.Sleep(time.Second)
	}
	if err := cluster.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "readyz to answer 200 again", func() bool { return status(t, p.base+"/readyz") == http.StatusOK })
	readyAt := time.Now()
	time.Sleep(2 * time.Second)
	stop()
	if err := syscall.Kill(p.cmd.Process.Pid, 0); err != nil {
		t.Fatalf("lull died during the outage:\n%s", p.out.String())
	}

	var accepted, refused int
	var slowest time.Duration
	for _, r := range load.log() {
		switch {
		case r.canceled:
		case r.status == http.StatusAccepted:
			accepted++
		case r.status == http.StatusServiceUnavailable && r.ctype == "application/problem+json":
			refused++
			slowest = max(slowest, r.took)
			if r.took > 5*time.Second {
				t.Errorf("%s: the 503 took %v", r.key, r.took)
			}
			if r.start.Add(r.took).Before(downAt) || r.start.After(readyAt) {
				t.Errorf("%s: 503 for a request made at %v, outside the outage (%v to %v)", r.key, r.start.Format("15:04:05.000"), downAt.Format("15:04:05.000"), readyAt.Format("15:04:05.000"))
			}
		default:
			t.Errorf("%s: answered %d (%s, %q) after %v, want 202 or a quick 503 problem", r.key, r.status, r.ctype, r.problem, r.took)
		}
	}
	if refused == 0 {
		t.Fatal("no request was refused during the outage; the test did not test it")
	}
	retried := load.retryPending(t, p.base)
	waitDrained(t, dbURL, 60*time.Second)
	batches := load.checkAcknowledged(t, dbURL, "sent")
	if n := queryInt(t, dbURL, "SELECT count(*) FROM batches WHERE state <> 'sent'"); n != 0 {
		t.Errorf("%d batches were not sent after the outage", n)
	}
	counts := smtp.BatchCounts()
	dupes := 0
	for id := range batches {
		switch c := counts[id]; {
		case c == 0:
			t.Errorf("batch %d was recorded sent but never arrived", id)
		case c > 1:
			dupes++
		}
	}
	checkProcessLog(t, p)
	t.Logf("postgres restart: %d events acknowledged, %d refused with 503 during the outage (slowest %v) and retried (%d), database back and ready after %v; %d batches delivered, %d of them twice",
		accepted, refused, slowest.Round(time.Millisecond), retried, readyAt.Sub(downAt).Round(100*time.Millisecond), len(batches), dupes)
}

// TestSeveralProcessesSendEachBatchOnce runs two, then three lull
// processes on one database, posting events to all of them. Every batch
// must be emailed exactly once, and the periodic jobs must be enqueued by
// one elected leader, not by every process: over the run, no more sweeps
// than one process alone would run, and one retention job.
func TestSeveralProcessesSendEachBatchOnce(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%dProcesses", n), func(t *testing.T) { t.Parallel(); severalProcesses(t, n) })
	}
}

func severalProcesses(t *testing.T, n int) {
	smtp := smtptest.Start(t, smtptest.KeepAll())
	dbURL := dbtest.NewURL(t)
	env := faultEnv(dbURL, smtp)
	var ps []*process
	var bases []string
	for range n {
		p := startProcess(t, env)
		ps, bases = append(ps, p), append(bases, p.base)
	}
	start := time.Now()
	ps[0].post(t, "/api/v1/types/several", faultAPIKey, cooldownType)
	load := newLoad("several", 50, 2, bases...)
	stop := load.start(6, 150)
	time.Sleep(5 * time.Second)
	stop()
	waitDrained(t, dbURL, 60*time.Second)
	elapsed := time.Since(start)

	for _, r := range load.log() {
		if !r.canceled && r.status != http.StatusAccepted {
			t.Errorf("%s: answered %d %q", r.key, r.status, r.problem)
		}
	}
	load.checkAcknowledged(t, dbURL, "sent")
	sent := int64Set(t, dbURL, "SELECT id FROM batches WHERE state = 'sent'")
	counts := smtp.BatchCounts()
	for id := range sent {
		if c := counts[id]; c != 1 {
			t.Errorf("batch %d emailed %d times, want once", id, c)
		}
	}
	if len(counts) != len(sent) {
		t.Errorf("%d distinct emails for %d sent batches", len(counts), len(sent))
	}

	sweeps := queryInt(t, dbURL, fmt.Sprintf("SELECT count(*) FROM river_job WHERE kind = 'sweep_due_batches' AND created_at >= now() - interval '%d milliseconds'", elapsed.Milliseconds()))
	// The sweep runs every 2 s (half of LULL_RESCUE_AFTER), and once when
	// a leader is elected.
	if most := int(elapsed/(2*time.Second)) + 2; sweeps > most {
		t.Errorf("%d sweeps in %v with %d processes, want at most %d (one leader enqueues them)", sweeps, elapsed.Round(time.Second), n, most)
	}
	if got := queryInt(t, dbURL, "SELECT count(*) FROM (SELECT date_trunc('hour', created_at) FROM river_job WHERE kind = 'retention' GROUP BY 1 HAVING count(*) > 1) d"); got != 0 {
		t.Errorf("the retention job ran more than once in an hour")
	}
	if got := queryInt(t, dbURL, "SELECT count(*) FROM river_leader"); got != 1 {
		t.Errorf("%d River leaders, want 1", got)
	}
	workers := queryInt(t, dbURL, "SELECT count(DISTINCT attempted_by[1]) FROM river_job WHERE kind = 'flush_batch'")
	for _, p := range ps {
		checkProcessLog(t, p)
	}
	t.Logf("%d processes: %d events acknowledged, %d batches each emailed once, flushes worked by %d processes; %d sweeps in %v",
		n, load.ackedCount(), len(sent), workers, sweeps, elapsed.Round(100*time.Millisecond))
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSIGTERMFinishesTheSendsInFlight sends SIGTERM to lull while six
// emails are being sent (four in the middle of SMTP, two waiting for one
// of the four connections) and a client holds a feed stream open, as
// during any deploy. lull must stop taking requests, let the sends finish
// and record them (so a restart does not send them again), close the
// stream, and exit cleanly within seconds, not at the end of its shutdown
// deadline with the sends canceled.
func TestSIGTERMFinishesTheSendsInFlight(t *testing.T) {
	t.Parallel()
	const n = 6
	smtp := smtptest.Start(t)
	smtp.Hold()
	dbURL := dbtest.NewURL(t)
	p := startProcess(t, faultEnv(dbURL, smtp))
	p.post(t, "/api/v1/types/alert", faultAPIKey, `{"default_mode":"immediate"}`)
	for i := range n {
		p.post(t, "/api/v1/events", faultAPIKey, fmt.Sprintf(`{"type":"alert","recipients":[{"id":"r%d","email":"r%d@example.com"}]}`, i, i))
	}
	waitUntil(t, 20*time.Second, "four emails in flight and two waiting", func() bool {
		return smtp.InFlight() == 4 && queryInt(t, dbURL, "SELECT count(*) FROM batches WHERE state = 'flushing'") == n
	})

	req, _ := http.NewRequest("GET", p.base+"/api/v1/recipients/r0/feed/stream", nil)
	req.Header.Set("Authorization", "Bearer "+faultAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("feed stream: %v %v", err, resp)
	}
	streamDone := make(chan struct{})
	go func() { io.Copy(io.Discard, resp.Body); resp.Body.Close(); close(streamDone) }()

	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	smtp.Release(true)
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("lull exited with %v after SIGTERM:\n%s", err, p.out.String())
		}
	case <-time.After(15 * time.Second):
		p.cmd.Process.Signal(syscall.SIGQUIT)
		time.Sleep(2 * time.Second)
		t.Fatalf("lull still running 15s after SIGTERM:\n%s", p.out.String())
	}
	took := time.Since(start)
	if took > 5*time.Second {
		t.Errorf("shutdown took %v, want a few seconds", took.Round(100*time.Millisecond))
	}
	select {
	case <-streamDone:
	case <-time.After(5 * time.Second):
		t.Error("the feed stream was left open after lull exited")
	}
	if got := smtp.Received(); got != n {
		t.Errorf("%d emails received, want %d", got, n)
	}
	if got := queryInt(t, dbURL, "SELECT count(*) FROM batches b JOIN deliveries d ON d.batch_id = b.id WHERE b.state = 'sent' AND d.confirmed"); got != n {
		t.Errorf("%d of the %d sends in progress at SIGTERM were finished and recorded", got, n)
	}
	t.Logf("SIGTERM with %d sends in progress and a feed stream open: exited after %v; %d emails received, %d recorded sent",
		n, took.Round(100*time.Millisecond), smtp.Received(), queryInt(t, dbURL, "SELECT count(*) FROM batches WHERE state = 'sent'"))
}
