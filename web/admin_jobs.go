package web

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/views"
)

// JobControl retries and cancels River jobs; cmd wires in River's client.
type JobControl interface {
	Retry(ctx context.Context, id int64) error
	Cancel(ctx context.Context, id int64) error
}

func jobRows(jobs []db.Job) []views.JobRow {
	var out []views.JobRow
	for _, j := range jobs {
		sched := j.ScheduledAt
		out = append(out, views.JobRow{ID: strconv.FormatInt(j.ID, 10), Kind: j.Kind, State: j.State,
			Attempts: fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts), Scheduled: fmtTime(&sched), Args: j.Args, Error: j.LastError,
			CanRetry: ranAndFailed(j), CanCancel: waiting(j)})
	}
	return out
}

// ranAndFailed is a job worth retrying by hand: it ran, its last run
// failed, and it will not run again by itself soon. A scheduled job that
// never ran has nothing to retry.
func ranAndFailed(j db.Job) bool {
	stopped := j.State == "retryable" || j.State == "discarded" || j.State == "cancelled"
	return stopped && j.Attempt > 0 && j.LastError != ""
}

// waiting is a job that will run by itself, so Cancel has something to
// stop.
func waiting(j db.Job) bool {
	return j.State == "retryable" || j.State == "scheduled" || j.State == "available"
}

// adminJobs is the job queue, read from River's own table.
func (s *Server) adminJobs(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	counts, err := db.JobCounts(ctx, s.DB.Pool)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	failing, err := db.ListJobs(ctx, s.DB.Pool, []string{"retryable", "discarded", "cancelled"}, 0, 50)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	upcoming, err := db.ListJobs(ctx, s.DB.Pool, []string{"scheduled", "available", "running"}, 0, 50)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	v := views.JobsView{AdminPage: s.adminPage(r, "Jobs", "jobs"), Failing: jobRows(failing), Upcoming: jobRows(upcoming)}
	for _, c := range counts {
		v.Counts = append(v.Counts, views.Stat{Label: c.Kind + " " + c.State, Value: strconv.Itoa(c.Count)})
	}
	s.render(w, r, http.StatusOK, views.Jobs(v))
}

// adminJobAction retries or cancels a job and records it.
func (s *Server) adminJobAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || s.Jobs == nil {
			s.pageError(w, r, db.ErrNotFound)
			return
		}
		act, offered := s.Jobs.Retry, ranAndFailed
		if action == "cancel job" {
			act, offered = s.Jobs.Cancel, waiting
		}
		// Act only where the page offers the action: a double click or a
		// stale page must not run a job early or twice (River retries a
		// scheduled or completed job if asked).
		j, err := db.GetJob(r.Context(), s.DB.Pool, id)
		if err != nil {
			s.pageError(w, r, err)
			return
		}
		if !offered(j) {
			s.flashRedirect(w, r, fmt.Sprintf("Nothing done: job %d is %s.", id, j.State), "/admin/jobs")
			return
		}
		if err := act(r.Context(), id); err != nil {
			s.flashRedirect(w, r, "Nothing done: "+err.Error(), "/admin/jobs")
			return
		}
		db.Audit(r.Context(), s.DB.Pool, db.AuditEntry{Operator: operator(r), Action: action, ObjectType: "job", ObjectID: strconv.FormatInt(id, 10)})
		s.flashRedirect(w, r, "Done: "+action+".", "/admin/jobs")
	}
}

// adminTypes lists the notification types.
func (s *Server) adminTypes(w http.ResponseWriter, r *http.Request) {
	ts, err := db.ListTypes(r.Context(), s.DB.Bun)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	v := views.TypesView{AdminPage: s.adminPage(r, "Types", "types")}
	for _, t := range ts {
		v.Rows = append(v.Rows, views.TypeAdminRow{Key: t.Key, Name: t.Name, Category: t.Category, Mode: t.DefaultMode, Required: t.Required,
			Window: preferences.FormatDuration(t.Window()), MaxWait: preferences.FormatDuration(t.MaxWait()), PreviewURL: "/admin/types/" + t.Key + "/preview",
			Locales: strings.Join(slices.Sorted(maps.Keys(t.Texts)), ", ")})
	}
	s.render(w, r, http.StatusOK, views.Types(v))
}
