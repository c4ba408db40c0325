package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/views"
)

// timeLayout names its zone: every time the console shows is UTC.
const timeLayout = "Jan 2 15:04:05 MST"

func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "–"
	}
	return t.UTC().Format(timeLayout)
}

// displayState is the state an operator sees: an open batch whose closing
// time has passed (after Flush now, or waiting for a worker) is "due",
// since it takes no more items and can no longer be flushed or canceled
// from the console.
func displayState(b *db.Batch, now time.Time) string {
	if b.State == db.StateOpen && !b.ClosesAt.After(now) {
		return "due"
	}
	return b.State
}

func batchRow(b *db.Batch, now time.Time) views.BatchRow {
	return views.BatchRow{ID: strconv.FormatInt(b.ID, 10), URL: fmt.Sprintf("/admin/batches/%d", b.ID), Recipient: b.RecipientID,
		Key: b.BatchKey, Mode: b.Mode, State: displayState(b, now), Items: strconv.Itoa(b.ItemCount),
		Opened: fmtTime(&b.OpenedAt), Closes: fmtTime(&b.ClosesAt), Processed: fmtTime(b.ProcessedAt)}
}

// adminBatches is the batch browser: the same filters and keyset paging as
// the API's listing.
func (s *Server) adminBatches(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := db.BatchFilter{State: q.Get("state"), Recipient: q.Get("recipient"), Type: q.Get("type"), BatchKey: q.Get("batch_key"), Limit: 50}
	if !validState(f.State) {
		f.State = ""
	}
	f.Before, _ = strconv.ParseInt(q.Get("cursor"), 10, 64)
	// datetime-local inputs send "2006-01-02T15:04", taken as UTC.
	f.OpenedFrom, _ = time.Parse("2006-01-02T15:04", q.Get("from"))
	f.OpenedUntil, _ = time.Parse("2006-01-02T15:04", q.Get("until"))
	bs, err := db.ListBatches(r.Context(), s.DB.Pool, f)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	v := views.BatchListView{AdminPage: s.adminPage(r, "Batches", "batches"), State: f.State, Recipient: f.Recipient, Type: f.Type, BatchKey: f.BatchKey,
		From: q.Get("from"), Until: q.Get("until")}
	for _, st := range []string{"", db.StateOpen, db.StateFlushing, db.StateSent, db.StateCanceled, db.StateFailed} {
		label := st
		if st == "" {
			label = "any"
		}
		v.States = append(v.States, views.Option{Value: st, Label: label, Selected: st == f.State})
	}
	for _, b := range bs {
		v.Rows = append(v.Rows, batchRow(b, s.now()))
	}
	if err := markSharedRows(r.Context(), s.DB.Pool, bs, v.Rows); err != nil {
		s.pageError(w, r, err)
		return
	}
	if len(bs) == f.Limit {
		q.Set("cursor", strconv.FormatInt(bs[len(bs)-1].ID, 10))
		v.NextURL = "/admin/batches?" + q.Encode()
	}
	s.render(w, r, http.StatusOK, views.Batches(v))
}

func (s *Server) adminBatch(w http.ResponseWriter, r *http.Request) {
	d, err := s.batchDetail(r)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	ctx := r.Context()
	row := batchRow(d.Batch, s.now())
	open := row.State == db.StateOpen
	v := views.BatchDetailView{AdminPage: s.adminPage(r, "Batch "+row.ID, "batches"),
		Batch: row, Reason: d.Reason, PreviewURL: fmt.Sprintf("/admin/batches/%d/preview", d.ID),
		CanFlush: open, CanCancel: open, CanRetry: d.State == db.StateFailed, NotSent: notSent(row.State)}
	for _, it := range d.Items {
		v.Items = append(v.Items, itemRow(it))
	}
	if err := s.foldedLinks(ctx, &v, d.Batch); err != nil {
		s.pageError(w, r, err)
		return
	}
	for _, dd := range d.Deliveries {
		v.Delivery = []views.Stat{{Label: "State", Value: dd.State}, {Label: "Attempts", Value: strconv.Itoa(dd.Attempts)},
			{Label: "Message-ID", Value: dd.MessageID}, {Label: "Sent", Value: fmtTime(dd.SentAt)}}
		if st := sharedStat(dd.SharedWith); st != nil {
			v.Delivery = append(v.Delivery, *st)
		}
		if st := leftOutStat(dd.LeftOut); st != nil {
			v.Delivery = append(v.Delivery, *st)
		}
		if dd.PossiblyLost {
			v.Delivery = append(v.Delivery, views.Stat{Label: "Possibly lost", Value: "yes", Note: "marked sent before SMTP confirmed (at-most-once)"})
		}
		for _, a := range dd.AttemptLog {
			res := "failed"
			if a.OK {
				res = "sent"
			}
			v.Attempts = append(v.Attempts, views.AttemptRow{At: fmtTime(&a.At), Result: res, Answer: a.Answer})
		}
	}
	jobs, err := db.ListJobs(ctx, s.DB.Pool, nil, d.ID, 50)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	v.Jobs = jobRows(jobs)
	v.Skips = skipRows(d.Skips)
	audit, err := db.AuditFor(ctx, s.DB.Pool, "batch", strconv.FormatInt(d.ID, 10))
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	for _, a := range audit {
		v.Audit = append(v.Audit, views.AuditRow{At: fmtTime(&a.At), Operator: a.Operator, Action: a.Action, Detail: a.Detail})
	}
	s.render(w, r, http.StatusOK, views.BatchDetail(v))
}

// notSent says why a batch has no delivery.
func notSent(state string) string {
	switch state {
	case db.StateOpen:
		return "Not sent yet: the batch is still collecting notifications."
	case "due", db.StateFlushing:
		return "Being sent: the flush job has it."
	case db.StateCanceled:
		return "Not sent: the batch was canceled (see the reason above and the skip log)."
	}
	return "No delivery recorded."
}

// cancelConfirm asks before canceling, so a click never cancels at once,
// with or without JavaScript.
func (s *Server) cancelConfirm(w http.ResponseWriter, r *http.Request) {
	d, err := s.batchDetail(r)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	row := batchRow(d.Batch, s.now())
	if row.State != db.StateOpen {
		s.flashRedirect(w, r, "Nothing to cancel: the batch is "+row.State+".", row.URL)
		return
	}
	v := views.BatchDetailView{AdminPage: s.adminPage(r, "Cancel batch "+row.ID, "batches"), Batch: row}
	s.render(w, r, http.StatusOK, views.CancelConfirm(v))
}

func itemRow(it db.Item) views.ItemRow {
	var a struct{ Name, ID string }
	var o struct{ Title, Type, ID string }
	json.Unmarshal(it.Actor, &a)
	json.Unmarshal(it.Object, &o)
	actor, title := a.Name, o.Title
	if actor == "" {
		actor = a.ID
	}
	if title == "" {
		title = o.Type + " " + o.ID
	}
	return views.ItemRow{Type: it.TypeKey, Actor: actor, Title: title, When: fmtTime(&it.OccurredAt), Retracted: it.RetractedAt != nil, Read: it.ReadAt != nil}
}

func skipRows(skips []db.SkipEntry) []views.SkipRow {
	var out []views.SkipRow
	for _, sk := range skips {
		out = append(out, views.SkipRow{At: fmtTime(&sk.At), Recipient: sk.RecipientID, Type: sk.TypeKey, Reason: sk.Reason, Items: strconv.Itoa(sk.Items)})
	}
	return out
}

// adminBatchAction runs an operator action on a batch, records it in the
// audit log, and returns to the batch with a message. A batch that is due
// is left alone, as its page offers no action.
func (s *Server) adminBatchAction(action string, act func(context.Context, int64) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			s.pageError(w, r, db.ErrNotFound)
			return
		}
		to := fmt.Sprintf("/admin/batches/%d", id)
		// The page offered the action for an open batch; a double click, a
		// reload or a Flush from another tab since may have made it due,
		// and a due batch belongs to its flush job (see displayState).
		b, err := db.GetBatch(r.Context(), s.DB.Pool, id)
		if err != nil {
			s.pageError(w, r, err)
			return
		}
		if displayState(b, s.now()) == "due" {
			s.flashRedirect(w, r, "Nothing done: the batch is due and its flush job sends it.", to)
			return
		}
		if err := act(r.Context(), id); err != nil {
			if errors.Is(err, batching.ErrNotOpen) || errors.Is(err, batching.ErrNotFailed) {
				s.flashRedirect(w, r, "Nothing done: "+err.Error()+".", to)
				return
			}
			s.pageError(w, r, err)
			return
		}
		err = db.Audit(r.Context(), s.DB.Pool, db.AuditEntry{Operator: operator(r), Action: action, ObjectType: "batch", ObjectID: strconv.FormatInt(id, 10)})
		if err != nil {
			s.pageError(w, r, err)
			return
		}
		s.flashRedirect(w, r, "Done: "+action+".", to)
	}
}

func withWidth(path string, phone bool) string {
	if phone {
		return path + "?" + url.Values{"width": {"phone"}}.Encode()
	}
	return path
}
