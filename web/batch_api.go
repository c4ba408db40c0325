package web

import (
	"context"
	"net/http"
	"strconv"

	"github.com/lull-dev/lull/db"
)

// listBatches is the operator listing, newest first, paged by cursor.
func (s *Server) listBatches(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := db.BatchFilter{State: q.Get("state"), Recipient: q.Get("recipient"), Type: q.Get("type"), BatchKey: q.Get("batch_key")}
	var errs []FieldError
	if f.State != "" && !validState(f.State) {
		errs = append(errs, FieldError{"state", "must be one of open, flushing, sent, canceled, failed"})
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			errs = append(errs, FieldError{"limit", "must be a number from 1 to 500"})
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, FieldError{"cursor", "is not a cursor this API returned"})
		}
		f.Before = n
	}
	if len(errs) > 0 {
		s.problem(w, r, Invalid(errs...))
		return
	}
	if f.Limit == 0 {
		f.Limit = 50
	}
	bs, err := db.ListBatches(r.Context(), s.DB.Pool, f)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	out := map[string]any{"batches": bs, "next_cursor": nil}
	if len(bs) == f.Limit {
		out["next_cursor"] = strconv.FormatInt(bs[len(bs)-1].ID, 10)
	}
	if bs == nil {
		out["batches"] = []any{}
	}
	writeJSON(w, http.StatusOK, out)
}

func validState(s string) bool {
	switch s {
	case db.StateOpen, db.StateFlushing, db.StateSent, db.StateCanceled, db.StateFailed:
		return true
	}
	return false
}

// BatchDetail is one batch with its items, delivery and skip log.
type BatchDetail struct {
	*db.Batch
	Items      []db.Item        `json:"items"`
	Deliveries []DeliveryDetail `json:"deliveries"`
	Skips      []db.SkipEntry   `json:"skips"`
}

// DeliveryDetail is a delivery with its attempts.
type DeliveryDetail struct {
	*db.Delivery
	AttemptLog []db.DeliveryAttempt `json:"attempt_log"`
	// SharedWith are the batches whose recipients got this email
	// together, this one included; empty when it went out alone.
	SharedWith []int64 `json:"shared_with,omitempty"`
	// LeftOut is the skip log of the members of the type and key left
	// out of a shared email (suppressed, muted, read), each naming their
	// batch and why; empty when it went out alone.
	LeftOut []db.SkipEntry `json:"left_out,omitempty"`
}

func (s *Server) batchDetail(r *http.Request) (*BatchDetail, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return nil, errNotFound
	}
	ctx := r.Context()
	b, err := db.GetBatch(ctx, s.DB.Pool, id)
	if err != nil {
		return nil, err
	}
	d := &BatchDetail{Batch: b, Items: []db.Item{}, Deliveries: []DeliveryDetail{}, Skips: []db.SkipEntry{}}
	if d.Items, err = db.BatchItems(ctx, s.DB.Pool, id, true); err != nil {
		return nil, err
	}
	if del, err := db.GetDeliveryByBatch(ctx, s.DB.Pool, id); err == nil {
		attempts, err := db.DeliveryAttempts(ctx, s.DB.Pool, del.ID)
		if err != nil {
			return nil, err
		}
		together, err := db.SharedWith(ctx, s.DB.Pool, id)
		if err != nil {
			return nil, err
		}
		dd := DeliveryDetail{Delivery: del, AttemptLog: attempts, SharedWith: together}
		if len(together) > 1 {
			if dd.LeftOut, err = db.SharedLeftOut(ctx, s.DB.Pool, id, 100); err != nil {
				return nil, err
			}
		}
		d.Deliveries = append(d.Deliveries, dd)
	}
	if d.Skips, err = db.ListSkips(ctx, s.DB.Pool, id, "", 100); err != nil {
		return nil, err
	}
	if d.Items == nil {
		d.Items = []db.Item{}
	}
	if d.Skips == nil {
		d.Skips = []db.SkipEntry{}
	}
	return d, nil
}

// getBatch shows one batch in full.
func (s *Server) getBatch(w http.ResponseWriter, r *http.Request) {
	d, err := s.batchDetail(r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// flushBatch makes an open batch due now.
func (s *Server) flushBatch(w http.ResponseWriter, r *http.Request) {
	s.batchAction(w, r, s.Engine.FlushNow)
}

// cancelBatch cancels an open batch.
func (s *Server) cancelBatch(w http.ResponseWriter, r *http.Request) {
	s.batchAction(w, r, func(ctx context.Context, id int64) error { return s.Engine.Cancel(ctx, id, "") })
}

func (s *Server) batchAction(w http.ResponseWriter, r *http.Request, act func(context.Context, int64) error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		s.problem(w, r, errNotFound)
		return
	}
	if err := act(r.Context(), id); err != nil {
		s.problem(w, r, err)
		return
	}
	b, err := db.GetBatch(r.Context(), s.DB.Pool, id)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, b)
}
