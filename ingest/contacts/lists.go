package contacts

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/ingest"
	"sendstream/schemas"
)

var (
	//go:embed sql/lists.sql
	sqlLists string
	//go:embed sql/list_get.sql
	sqlListGet string
	//go:embed sql/create_list.sql
	sqlCreateList string
	//go:embed sql/set_membership.sql
	sqlSetMembership string
	//go:embed sql/unsubscribe.sql
	sqlUnsubscribe string
	//go:embed sql/confirm.sql
	sqlConfirm string
)

// CreateList creates a list in ws and returns it.
func (s *Store) CreateList(ctx context.Context, ws, name string, doubleOptIn bool) (List, error) {
	name = strings.TrimSpace(name)
	if name == "" || len([]rune(name)) > 200 {
		return List{}, fmt.Errorf("list name: want 1 to 200 characters")
	}
	l := List{ID: schemas.NewID(), Name: name, DoubleOptIn: doubleOptIn}
	if err := s.pool.QueryRow(ctx, sqlCreateList, l.ID, ws, name, doubleOptIn).Scan(&l.CreatedAt); err != nil {
		return List{}, fmt.Errorf("create list %q: %w", name, err)
	}
	l.CreatedAt = l.CreatedAt.UTC()
	return l, nil
}

// Lists returns every list of ws, oldest first, with contactCount.
func (s *Store) Lists(ctx context.Context, ws string) ([]List, error) {
	rows, err := s.pool.Query(ctx, sqlLists, ws)
	if err != nil {
		return nil, fmt.Errorf("lists of %s: %w", ws, err)
	}
	out := []List{}
	var l List
	_, err = pgx.ForEachRow(rows, []any{&l.ID, &l.Name, &l.DoubleOptIn, &l.ContactCount, &l.CreatedAt}, func() error {
		l.CreatedAt = l.CreatedAt.UTC()
		out = append(out, l)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lists of %s: %w", ws, err)
	}
	return out, nil
}

// ListRef is what the write paths need of a list.
type ListRef struct {
	ID          string
	Workspace   string
	Name        string
	DoubleOptIn bool
}

// List returns list id of ws, or ErrListNotFound. Pass ws "" to look a list
// up by id alone (the public sign-up form). Lists are cached (never deleted;
// names refresh within 30 s).
func (s *Store) List(ctx context.Context, ws, id string) (ListRef, error) {
	if id == "" || len(id) > 64 {
		return ListRef{}, ErrListNotFound
	}
	s.lists.mu.Lock()
	c, ok := s.lists.m[id]
	s.lists.mu.Unlock()
	if !ok || time.Since(c.at) > s.lists.ttl {
		err := s.pool.QueryRow(ctx, sqlListGet, id).Scan(&c.ws, &c.name, &c.doubleOptIn)
		if errors.Is(err, pgx.ErrNoRows) {
			return ListRef{}, ErrListNotFound
		}
		if err != nil {
			return ListRef{}, fmt.Errorf("get list %s: %w", id, err)
		}
		c.at = time.Now()
		s.lists.mu.Lock()
		s.lists.m[id] = c
		s.lists.mu.Unlock()
	}
	if ws != "" && c.ws != ws {
		return ListRef{}, ErrListNotFound
	}
	return ListRef{ID: id, Workspace: c.ws, Name: c.name, DoubleOptIn: c.doubleOptIn}, nil
}

// Target names the contact of a membership call: Email (normalized) or ID.
// With Email, a missing contact is created (Fields, Source and Metadata
// apply to that creation only; an existing contact is not changed).
type Target struct {
	Email    string
	ID       string
	Fields   Fields
	Source   string
	Metadata json.RawMessage
}

// Announce builds the domain events of a write from its outcome. The Store
// calls it inside the write's transaction, once the write succeeded (again
// when a deadlock makes it run the write again), and writes what it returns
// into contact_outbox before the commit. It must not block. A nil Announce
// announces nothing.
type Announce[R any] func(R) []ingest.Message

// of is what f announces for r.
func (f Announce[R]) of(r R) []ingest.Message {
	if f == nil {
		return nil
	}
	return f(r)
}

// Announced is what every write with domain events returns besides its
// outcome: the events Announce built, to publish before answering, and
// their contact_outbox rows, to pass to Store.Published once the broker
// acknowledged them (the relay publishes them otherwise, same envelopes).
type Announced struct {
	Events []ingest.Message
	Outbox []int64
}

// MembershipResult is the outcome of Subscribe or Signup.
type MembershipResult struct {
	Contact        Contact
	ContactCreated bool
	Previous       string // membership status before; "" for none
	Status         string // membership status after
	Changed        bool   // the membership row was created or moved
	Announced
}

// Subscribe puts the target on list l as ACTIVE (spec 3.2, POST
// /v1/lists/{id}/subscribe): a missing contact is created ACTIVE with source
// "api" unless t.Source says otherwise; none, UNSUBSCRIBED or PENDING becomes
// ACTIVE. ErrContactNotFound when t.ID names no contact, ErrContactLimit
// when creating the contact would exceed the plan. The events announce
// builds (the contact's creation included) go into the outbox with the
// change.
func (s *Store) Subscribe(ctx context.Context, l ListRef, t Target, announce Announce[MembershipResult]) (MembershipResult, error) {
	if t.Source == "" {
		t.Source = "api"
	}
	return s.setMembership(ctx, l, t, StatusActive, StatusActive, announce)
}

// Signup is a sign-up through the hosted form of list l: with double opt-in
// the membership (none or UNSUBSCRIBED) becomes PENDING and a new contact is
// created PENDING; without it, as Subscribe with source "form". announce
// builds the events, the confirmation email's request included when the
// result's Status is PENDING (also when it already was: a repeated sign-up
// resends it).
func (s *Store) Signup(ctx context.Context, l ListRef, t Target, announce Announce[MembershipResult]) (MembershipResult, error) {
	if t.Source == "" {
		t.Source = "form"
	}
	if l.DoubleOptIn {
		return s.setMembership(ctx, l, t, StatusPending, StatusPending, announce)
	}
	return s.setMembership(ctx, l, t, StatusActive, StatusActive, announce)
}

// setMembership runs, in one transaction: the contact creation (when
// t.Email is set) with createStatus and set_membership.sql with target
// status (one round trip), then the outbox rows of what announce builds.
func (s *Store) setMembership(ctx context.Context, l ListRef, t Target, createStatus, target string, announce Announce[MembershipResult]) (MembershipResult, error) {
	var res MembershipResult
	var custom *string
	if t.Email != "" {
		var err error
		if custom, err = encodeCustom(t.Fields.CustomFields); err != nil {
			return res, err
		}
	}
	write := func(tx pgx.Tx) error {
		res = MembershipResult{}
		b := &pgx.Batch{}
		if t.Email != "" {
			var a upsertArgs
			a.add(schemas.NewID(), UpsertInput{Email: t.Email, Fields: t.Fields, Source: t.Source, Metadata: t.Metadata}, custom, createStatus)
			a.queue(b, l.Workspace, false, membershipShard, s.scope)
		}
		var email, id *string
		if t.Email != "" {
			email = &t.Email
		} else {
			id = &t.ID
		}
		b.Queue(sqlSetMembership, l.Workspace, l.ID, email, id, target)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		var refused bool
		if t.Email != "" {
			rows, err := readUpserts(br)
			if err != nil {
				return fmt.Errorf("create contact: %w", err)
			}
			if len(rows) != 1 {
				return fmt.Errorf("create contact: %d result rows", len(rows))
			}
			switch rows[0].outcome {
			case "created":
				res.ContactCreated = true
			case "refused":
				refused = true
			case "retry":
				return errRace
			}
		}
		var prev *string
		var custom, meta []byte
		c := &res.Contact
		err := br.QueryRow().Scan(&c.ID, &c.Email, &c.FirstName, &c.Country, &c.Language, &c.Status, &c.Source,
			&meta, &custom, &c.CreatedAt, &c.UpdatedAt, &prev, &res.Status, &res.Changed)
		if errors.Is(err, pgx.ErrNoRows) {
			if refused {
				return ErrContactLimit
			}
			return ErrContactNotFound
		}
		if err != nil {
			return fmt.Errorf("set membership: %w", err)
		}
		c.CustomFields, c.Metadata = rawOrEmpty(custom), rawOrNull(meta)
		c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
		if prev != nil {
			res.Previous = *prev
		}
		return br.Close()
	}
	events, ids, err := s.InOutbox(ctx, write, func() []ingest.Message { return announce.of(res) })
	if err != nil {
		return MembershipResult{}, err
	}
	res.Events, res.Outbox = events, ids
	return res, nil
}

// membershipShard is the counter shard of contacts created by Subscribe
// and Signup (outside the batcher's shards 0..maxInFlight-1).
const membershipShard = maxInFlight

// errRace: the contact was created by a concurrent transaction between the
// statement's snapshot and its insert; running again sees it.
var errRace = errors.New("contact created concurrently")

// UnsubscribeResult is the outcome of Unsubscribe.
type UnsubscribeResult struct {
	ContactID string // "" when no such contact
	Email     string
	Removed   bool // a membership moved to UNSUBSCRIBED
	Announced
}

// Unsubscribe moves the target's membership of list l to UNSUBSCRIBED (spec
// 3.2), keeping the row. Removed is false when there was nothing to
// unsubscribe (no contact, no membership, or already unsubscribed). The
// events announce builds go into the outbox with the change.
func (s *Store) Unsubscribe(ctx context.Context, l ListRef, t Target, announce Announce[UnsubscribeResult]) (UnsubscribeResult, error) {
	var email, id *string
	if t.Email != "" {
		email = &t.Email
	} else {
		id = &t.ID
	}
	var r UnsubscribeResult
	write := func(tx pgx.Tx) error {
		r = UnsubscribeResult{}
		err := tx.QueryRow(ctx, sqlUnsubscribe, l.Workspace, l.ID, email, id).Scan(&r.ContactID, &r.Email, &r.Removed)
		if errors.Is(err, pgx.ErrNoRows) {
			r = UnsubscribeResult{}
			return nil
		}
		return err
	}
	events, ids, err := s.InOutbox(ctx, write, func() []ingest.Message { return announce.of(r) })
	if err != nil {
		return UnsubscribeResult{}, fmt.Errorf("unsubscribe from %s: %w", l.ID, err)
	}
	r.Events, r.Outbox = events, ids
	return r, nil
}

// ConfirmedList is a list a confirmation click activated.
type ConfirmedList struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	ConfirmedAt time.Time `json:"confirmedAt"`
}

// ConfirmResult is the outcome of a double opt-in click.
type ConfirmResult struct {
	Email            string
	ContactConfirmed bool            // the contact went PENDING -> ACTIVE
	Lists            []ConfirmedList // memberships activated (empty on a repeat)
	Announced
}

// Confirm activates every PENDING membership of contact id in ws at once,
// and the contact itself when it is PENDING (spec 3.2). A repeated call
// changes nothing and returns no lists. ErrContactNotFound when the contact
// is gone. The events announce builds go into the outbox with the change.
func (s *Store) Confirm(ctx context.Context, ws, id string, announce Announce[ConfirmResult]) (ConfirmResult, error) {
	var r ConfirmResult
	write := func(tx pgx.Tx) error {
		r = ConfirmResult{}
		var lists []byte
		err := tx.QueryRow(ctx, sqlConfirm, ws, id).Scan(&r.Email, &r.ContactConfirmed, &lists)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrContactNotFound
		}
		if err != nil {
			return fmt.Errorf("confirm contact %s: %w", id, err)
		}
		if err := json.Unmarshal(lists, &r.Lists); err != nil {
			return fmt.Errorf("confirm contact %s: decode lists: %w", id, err)
		}
		for i := range r.Lists {
			r.Lists[i].ConfirmedAt = r.Lists[i].ConfirmedAt.UTC()
		}
		return nil
	}
	events, ids, err := s.InOutbox(ctx, write, func() []ingest.Message { return announce.of(r) })
	if err != nil {
		return ConfirmResult{}, err
	}
	r.Events, r.Outbox = events, ids
	return r, nil
}
