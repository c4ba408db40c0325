package mail

import (
	"context"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
)

// Outbox is the built-in sender used when no SMTP server is configured:
// it keeps every email in PostgreSQL, with the headers SMTP would have
// carried, for operators to read in the console.
type Outbox struct {
	DB *db.DB
}

// Send stores m.
func (o *Outbox) Send(ctx context.Context, m *mailtemplates.Message) error {
	var batchID *int64
	if m.BatchID != 0 {
		batchID = &m.BatchID
	}
	return db.InsertOutbox(ctx, o.DB.Pool, &db.OutboxMessage{
		MessageID: m.MessageID, BatchID: batchID, From: m.From, To: m.To, Subject: m.Subject,
		Headers: Headers(m), Text: m.Text, HTML: m.HTML,
	})
}
