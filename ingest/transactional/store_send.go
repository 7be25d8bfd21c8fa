package transactional

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/schemas"
)

// This file holds what a send reads and writes: the lookups and message
// claims that concurrent sends share statements for (pgsink.Batcher), and
// the message of an externalId.

// StoredContact is the recipient's contact record as a send sees it.
type StoredContact struct {
	ID           string         `json:"id"`
	Status       string         `json:"status"`
	FirstName    *string        `json:"firstName"`
	Country      *string        `json:"country"`
	Language     *string        `json:"language"`
	CustomFields map[string]any `json:"customFields"`
}

// Existing is a message already stored under an externalId.
type Existing struct {
	ID          string    `json:"id"`
	Status      string    `json:"status"`
	To          string    `json:"to"`
	MessageID   string    `json:"messageId"`
	ContactID   *string   `json:"contactId"`
	Warnings    []string  `json:"warnings"`
	RequestHash string    `json:"requestHash"`
	CreatedAt   time.Time `json:"createdAt"`
	Spilled     bool      `json:"-"`
}

// Lookup is what one send needs from Postgres, read in one round trip.
type Lookup struct {
	Contact *StoredContact
	// Suppressed maps an address of the send to its suppression reasons.
	Suppressed map[string][]string
	// Policy is nil when the named policy does not exist.
	Policy *Policy
	// TemplateVersion is 0 when the template does not exist (or none was
	// named).
	TemplateVersion int64
	// Domains the workspace owns, oldest first.
	Domains  []string
	Existing *Existing
}

// LookupInput names what to look up.
type LookupInput struct {
	Email      string
	Addresses  []string // every address of the send, Email included
	PolicyRef  string   // key or id; "" for the default
	TemplateID string
	ExternalID string
}

type lookupIn struct {
	ws string
	in LookupInput
}

type lookupOut struct {
	contact, sup, pol, existing []byte
	version                     *int64
	domains                     []string
}

// Lookup reads the contact, suppressions, policy, template version,
// domains and any message of the externalId, in a statement shared with
// concurrent sends.
func (s *Store) Lookup(ctx context.Context, ws string, in LookupInput) (Lookup, error) {
	r, err := s.lookups.Do(ctx, lookupIn{ws: ws, in: in})
	if err != nil {
		return Lookup{}, fmt.Errorf("transactional lookup: %w", err)
	}
	var l Lookup
	if r.contact != nil {
		l.Contact = &StoredContact{}
		if err := json.Unmarshal(r.contact, l.Contact); err != nil {
			return l, fmt.Errorf("transactional lookup: contact: %w", err)
		}
	}
	if r.sup != nil {
		var pairs [][2]string
		if err := json.Unmarshal(r.sup, &pairs); err != nil {
			return l, fmt.Errorf("transactional lookup: suppressions: %w", err)
		}
		l.Suppressed = map[string][]string{}
		for _, p := range pairs {
			l.Suppressed[p[0]] = append(l.Suppressed[p[0]], p[1])
		}
	}
	if r.pol != nil {
		var p struct {
			ID, Key, Kind, Provider string
			FromEmail, FromName     *string
		}
		if err := json.Unmarshal(r.pol, &p); err != nil {
			return l, fmt.Errorf("transactional lookup: policy: %w", err)
		}
		l.Policy = &Policy{ID: p.ID, Key: p.Key, Kind: p.Kind, Provider: p.Provider, FromEmail: deref(p.FromEmail), FromName: deref(p.FromName)}
	} else if in.PolicyRef == "" || in.PolicyRef == DefaultPolicyKey || in.PolicyRef == BuiltinPolicy(ws).ID {
		p := BuiltinPolicy(ws)
		l.Policy = &p
	}
	if r.version != nil {
		l.TemplateVersion = *r.version
	}
	l.Domains = r.domains
	if r.existing != nil {
		l.Existing = &Existing{}
		if err := json.Unmarshal(r.existing, l.Existing); err != nil {
			return l, fmt.Errorf("transactional lookup: existing message: %w", err)
		}
	}
	return l, nil
}

// lookupBatch runs lookup_batch.sql for several sends.
func (s *Store) lookupBatch(ctx context.Context, ins []lookupIn) ([]lookupOut, error) {
	n := len(ins)
	ords, wss, emails, refs, tpls, ids := make([]int32, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	var aOrd []int32
	var aEmail []string
	for i, x := range ins {
		ref := x.in.PolicyRef
		if ref == "" {
			ref = DefaultPolicyKey
		}
		ords[i], wss[i], emails[i], refs[i], tpls[i] = int32(i), x.ws, x.in.Email, ref, x.in.TemplateID
		ids[i] = schemas.MessageIDOf(x.ws, x.in.ExternalID)
		for _, a := range x.in.Addresses {
			aOrd = append(aOrd, int32(i))
			aEmail = append(aEmail, a)
		}
	}
	rows, err := s.async.Query(ctx, sqlLookupBatch, ords, wss, emails, refs, tpls, ids, aOrd, aEmail)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]lookupOut, n)
	for rows.Next() {
		var ord int32
		var r lookupOut
		if err := rows.Scan(&ord, &r.contact, &r.sup, &r.pol, &r.version, &r.domains, &r.existing); err != nil {
			return nil, err
		}
		if ord < 0 || int(ord) >= n {
			return nil, fmt.Errorf("lookup: ordinal %d out of range", ord)
		}
		out[ord] = r
	}
	return out, rows.Err()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// NewMessage is a message to store with status queued.
type NewMessage struct {
	ID, Workspace, ExternalID string
	RequestHash               []byte
	To, ContactID             string
	RFCMessageID              string
	PolicyID, TemplateID      string
	Warnings                  []string
	Provider                  string
	Spill                     []byte // the encoded payload when it is stored here
}

type claimOut struct {
	createdAt time.Time
	ok        bool
}

// Claim stores m. ok false means another message already holds the
// externalId; existing is that message. Claims of concurrent sends share a
// statement; a message with a spilled payload is stored on its own.
func (s *Store) Claim(ctx context.Context, m NewMessage) (createdAt time.Time, ok bool, existing *Existing, err error) {
	if m.Spill != nil {
		createdAt, ok, err = s.claimOne(ctx, m)
	} else {
		var r claimOut
		r, err = s.claims.Do(ctx, m)
		createdAt, ok = r.createdAt, r.ok
	}
	if err != nil {
		return time.Time{}, false, nil, fmt.Errorf("store message: %w", err)
	}
	if ok {
		return createdAt, true, nil, nil
	}
	if m.ExternalID == "" {
		return time.Time{}, false, nil, errors.New("store message: id collision")
	}
	ex, err := s.Existing(ctx, m.Workspace, m.ExternalID)
	if err != nil {
		return time.Time{}, false, nil, err
	}
	if ex == nil {
		return time.Time{}, false, nil, errors.New("store message: externalId conflict but no message")
	}
	return time.Time{}, false, ex, nil
}

// claimOne stores one message with its spilled payload (claim.sql).
func (s *Store) claimOne(ctx context.Context, m NewMessage) (time.Time, bool, error) {
	warnings := m.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	var id string
	var at time.Time
	// The synchronous pool: the spilled payload lives only here.
	err := s.pool.QueryRow(ctx, sqlClaim, m.ID, m.Workspace, m.ExternalID, m.RequestHash, m.To, m.ContactID,
		m.RFCMessageID, m.PolicyID, m.TemplateID, warnings, m.Provider, m.Spill).Scan(&id, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	return at, err == nil, err
}

// claimBatch runs claim_batch.sql: of several inputs with one id only the
// first is the one stored.
func (s *Store) claimBatch(ctx context.Context, ms []NewMessage) ([]claimOut, error) {
	n := len(ms)
	cols := make([][]string, 11)
	for i := range cols {
		cols[i] = make([]string, n)
	}
	for i, m := range ms {
		vals := []string{m.ID, m.Workspace, m.ExternalID, hex.EncodeToString(m.RequestHash), m.To, m.ContactID,
			m.RFCMessageID, m.PolicyID, m.TemplateID, strings.Join(m.Warnings, "\n"), m.Provider}
		for c, v := range vals {
			cols[c][i] = v
		}
	}
	args := make([]any, len(cols))
	for i := range cols {
		args[i] = cols[i]
	}
	rows, err := s.async.Query(ctx, sqlClaimBatch, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	created := map[string]time.Time{}
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		created[id] = at
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]claimOut, n)
	for i, m := range ms {
		if at, ok := created[m.ID]; ok {
			out[i] = claimOut{createdAt: at, ok: true}
			delete(created, m.ID) // a later input with the same id lost
		}
	}
	return out, nil
}

// Existing returns the message of an externalId, or nil.
func (s *Store) Existing(ctx context.Context, ws, externalID string) (*Existing, error) {
	var e Existing
	var contactID string
	err := s.pool.QueryRow(ctx, sqlExisting, ws, schemas.MessageIDOf(ws, externalID)).
		Scan(&e.ID, &e.Status, &e.To, &e.MessageID, &contactID, &e.Warnings, &e.RequestHash, &e.CreatedAt, &e.Spilled)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read message of externalId: %w", err)
	}
	if contactID != "" {
		e.ContactID = &contactID
	}
	return &e, nil
}

// requestHashHex encodes a request hash as stored.
func requestHashHex(h []byte) string { return hex.EncodeToString(h) }
