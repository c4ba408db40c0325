package mail

import (
	"context"
	"strings"

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
		MessageID: m.MessageID, BatchID: batchID, From: m.From, To: outboxTo(m), Subject: m.Subject,
		Headers: Headers(m), Text: m.Text, HTML: m.HTML,
	})
}

// outboxTo is who an email went to: its recipient, or every envelope
// recipient of a shared email.
func outboxTo(m *mailtemplates.Message) string {
	if len(m.Rcpts) > 0 {
		return strings.Join(m.Rcpts, ", ")
	}
	return m.To
}
