package transactional

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/schemas"
)

// This file reads stored messages for the status lookup and the list.

// sqlListProblem is sqlList for a status of problemStatuses: it reads the
// partial index of those messages (schemas/postgres/0044) instead of all of
// the workspace's messages newest first.
var sqlListProblem = mustReplace(sqlList, "($3 = '' OR status = $3)", "problem = $3")

// problemStatuses are the statuses the problem column (and its index) holds.
var problemStatuses = []string{"bounced", "complained", "failed"}

// mustReplace replaces the one occurrence of old in s; it panics if there is
// none, so a changed SQL file fails every test at once.
func mustReplace(s, old, new string) string {
	if strings.Count(s, old) != 1 {
		panic(fmt.Sprintf("transactional: %q is not in the SQL once", old))
	}
	return strings.Replace(s, old, new, 1)
}

// Message is a stored message as the API shows it (status lookup and list).
type Message struct {
	ID            string
	Status        string
	To            string
	RFCMessageID  string
	ExternalID    string
	ContactID     string
	TemplateID    string
	PolicyID      string
	Provider      string
	FailureReason string
	BounceType    string
	BounceReason  string
	ComplaintType string
	CreatedAt     time.Time
	SentAt        *time.Time
	DeliveredAt   *time.Time
	BouncedAt     *time.Time
	ComplainedAt  *time.Time
	FailedAt      *time.Time
	// Subject is the subject line as rendered when the message was handed
	// off; nil before that, or when it failed before its subject rendered.
	Subject *string
}

func scanMessage(row pgx.Row) (Message, error) {
	var m Message
	err := row.Scan(&m.ID, &m.Status, &m.To, &m.RFCMessageID, &m.ExternalID, &m.ContactID, &m.TemplateID,
		&m.PolicyID, &m.Provider, &m.FailureReason, &m.BounceType, &m.BounceReason, &m.ComplaintType,
		&m.CreatedAt, &m.SentAt, &m.DeliveredAt, &m.BouncedAt, &m.ComplainedAt, &m.FailedAt, &m.Subject)
	return m, err
}

// Get returns a message by service id or, when id is "", by externalId.
func (s *Store) Get(ctx context.Context, ws, id, externalID string) (Message, error) {
	if id == "" {
		id = schemas.MessageIDOf(ws, externalID)
	}
	m, err := scanMessage(s.pool.QueryRow(ctx, sqlMessage, ws, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return m, ErrMessageNotFound
	}
	if err != nil {
		return m, fmt.Errorf("read message: %w", err)
	}
	return m, nil
}

// ListQuery selects a page of messages.
type ListQuery struct {
	To, Status, ExternalID string
	Before                 string // a message id; "" for the newest
	Limit                  int
}

// List returns one page, newest first. ErrBadCursor when Before is not a
// message of the workspace.
func (s *Store) List(ctx context.Context, ws string, q ListQuery) ([]Message, error) {
	if q.Before != "" {
		var ok bool
		if err := s.pool.QueryRow(ctx, sqlCursorExists, ws, q.Before).Scan(&ok); err != nil {
			return nil, fmt.Errorf("list messages: %w", err)
		}
		if !ok {
			return nil, ErrBadCursor
		}
	}
	query := sqlList
	if contains(problemStatuses, q.Status) {
		query = sqlListProblem
	}
	rows, err := s.pool.Query(ctx, query, ws, q.To, q.Status, schemas.MessageIDOf(ws, q.ExternalID), q.Before, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("list messages: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return out, nil
}
