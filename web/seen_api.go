package web

import (
	"net/http"

	"github.com/lull-dev/lull/db"
)

// recipientSeen records that the recipient is active now, for catch-up:
// a host calls it when the person uses the product (signs in, opens a
// page), as lull cannot see that itself. Listing or opening the feed
// (GET feed, feed/seen, feed/read) and the settings page count already.
func (s *Server) recipientSeen(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := db.GetRecipient(r.Context(), s.DB.Bun, id); err != nil {
		s.problem(w, r, err)
		return
	}
	now := s.now()
	if err := db.TouchSeen(r.Context(), s.DB.Pool, id, now); err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"seen_at": now.UTC()})
}
