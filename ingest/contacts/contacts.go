// Package contacts holds contacts, custom fields, subscription lists and
// memberships (spec 2.1, 2.2, 3.2, 4.5): the domain store over Postgres
// (Store, SQL in sql/*.sql), the double opt-in link signer, and the HTTP
// handlers of /api/v1/contacts, /api/v1/lists, the hosted sign-up form
// /forms/{listId} and the confirmation page /confirm. Handlers parse, call the
// Store and return the answer with the envelopes to publish; no SQL or
// Postgres types reach them, and no HTTP types reach the Store.
//
// How the hot paths work:
//
//   - Upserts of one workspace are grouped (group commit): concurrent calls
//     queue and each statement takes everything queued (up to 256, emails
//     unique), in one round trip: lock_for_create.sql then
//     upsert_contacts.sql in one implicit transaction. Up to 4 statements
//     of a workspace run at once; an email is never in two of them.
//   - Uniqueness per (workspace, email) is the database's: a unique index
//     and INSERT ... ON CONFLICT, so concurrent creations of one email, in
//     any number of processes, create one row and exactly one caller sees
//     created: true.
//   - The plan's contact limit is exact: in a workspace with a limit, a
//     statement that may create contacts first locks the workspace's total
//     counter row until commit, then admits new rows while the total
//     allows. Workspaces without a limit take no such lock.
//   - Newest first is descending seq, from one global sequence. Counts per
//     (workspace, status) and per (list, contact status) in 32768-wide and
//     1024-wide seq buckets, kept exact in the same transactions (and by
//     triggers for status changes and deletes by other code), let a page at
//     any depth find its start from ~60 counter rows and an index-only skip
//     of at most ~1024 entries; total comes from the same counts.
//     Counter rows are sharded per concurrent statement and bumped in key
//     order at the end of the statement, so statements neither deadlock nor
//     wait for each other's commit.
//
// Domain events are returned to the server, which publishes them before
// answering, and every one of them is also written into contact_outbox in
// the same transaction as the change: the upsert statement writes each
// contact's row itself; membership writes, sign-ups and confirmations run
// in one transaction whose events the handler builds (Announce) and the
// Store writes before the commit. After the broker's ack the server
// deletes the rows (Store.Published, batched in the background); a row
// left behind by a crash, a failed publish or a time-out is published by
// the relay (Store.StartRelay) after its grace period, as the same
// envelope, so a process dying between commit and publish delays the event
// but does not lose it.
package contacts

import (
	"encoding/json"
	"errors"
	"time"
)

// Contact statuses (spec 2.1).
const (
	StatusActive       = "ACTIVE"
	StatusUnsubscribed = "UNSUBSCRIBED"
	StatusBounced      = "BOUNCED"
	StatusComplained   = "COMPLAINED"
	StatusPending      = "PENDING"
)

// ContactStatuses lists every contact status.
var ContactStatuses = []string{StatusActive, StatusUnsubscribed, StatusBounced, StatusComplained, StatusPending}

// ValidStatus reports whether s is a contact status.
func ValidStatus(s string) bool {
	for _, v := range ContactStatuses {
		if v == s {
			return true
		}
	}
	return false
}

// Errors of the Store. Handlers map them to answers; anything else is a 500.
var (
	// ErrContactLimit: creating the contact would exceed the plan's limit.
	ErrContactLimit = errors.New("contact limit reached")
	// ErrListNotFound: no list with that id in the workspace.
	ErrListNotFound = errors.New("list not found")
	// ErrContactNotFound: no contact with that id in the workspace.
	ErrContactNotFound = errors.New("contact not found")
	// ErrExists: an object with that name or key already exists.
	ErrExists = errors.New("already exists")
)

// Contact is one contact as the API shows it. Optional text fields are nil
// when never set; CustomFields and Metadata are JSON objects as stored.
type Contact struct {
	ID           string          `json:"id"`
	Email        string          `json:"email"`
	FirstName    *string         `json:"firstName"`
	Country      *string         `json:"country"`
	Language     *string         `json:"language"`
	Status       string          `json:"status"`
	Source       *string         `json:"source"`
	CustomFields json.RawMessage `json:"customFields"`
	Metadata     json.RawMessage `json:"metadata"`
	CreatedAt    time.Time       `json:"createdAt"`
	UpdatedAt    time.Time       `json:"updatedAt"`
}

// List is a subscription list with its membership count (every membership,
// pending and unsubscribed included).
type List struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	DoubleOptIn  bool      `json:"doubleOptIn"`
	ContactCount int64     `json:"contactCount"`
	CreatedAt    time.Time `json:"createdAt"`
}

// Membership is one list a contact is on, as search shows it.
type Membership struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	ConfirmedAt *time.Time `json:"confirmedAt"`
}

// ContactWithLists is a contact with its memberships (search).
type ContactWithLists struct {
	Contact
	Lists []Membership `json:"lists"`
}

// Fields is the changeable part of a contact in an upsert. A nil pointer
// keeps the current value; CustomFields is a patch whose nil values remove
// the key (already validated against the workspace's definitions).
type Fields struct {
	FirstName    *string
	Country      *string
	Language     *string
	CustomFields map[string]any
}

// UpsertInput is one contact to create or update. Email must already be
// normalized (NormalizeEmail). Source and Metadata apply at creation only.
type UpsertInput struct {
	Email    string
	Fields   Fields
	Source   string
	Metadata json.RawMessage // a JSON object, or nil
	// RequestID is the id of the request that asks for the change: the
	// causation id of its event, kept in the outbox so that the relay
	// publishes the envelope the request would have published.
	RequestID string
}

// UpsertResult is what an upsert did. Changed names the fields an update
// changed ("firstName", "customFields.plan"); it is empty when Created or
// when nothing changed.
type UpsertResult struct {
	Contact Contact
	Created bool
	Changed []string
	// Outbox is the contact_outbox row holding the event of this change,
	// written in its transaction (0 when nothing was announced). After
	// publishing UpsertMessages, the caller passes it to Store.Published;
	// otherwise the relay publishes the event once its grace period passed.
	Outbox int64
}

// Page is one page of GET /v1/contacts.
type Page struct {
	Contacts []Contact
	Total    int64
}

// PageQuery selects a page: Offset rows skipped in newest-first order, at
// most Limit rows, optionally only one contact status and/or one list's
// members (any membership status).
type PageQuery struct {
	Offset int64
	Limit  int
	Status string // "" means any
	ListID string // "" means every contact
}
