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

// MembershipResult is the outcome of Subscribe or Signup.
type MembershipResult struct {
	Contact        Contact
	ContactCreated bool
	Previous       string // membership status before; "" for none
	Status         string // membership status after
	Changed        bool   // the membership row was created or moved
	// Outbox is the contact_outbox row of contact.created when the call
	// created the contact (0 otherwise); see UpsertResult.Outbox.
	Outbox int64
}

// Subscribe puts the target on list l as ACTIVE (spec 3.2, POST
// /v1/lists/{id}/subscribe): a missing contact is created ACTIVE with source
// "api" unless t.Source says otherwise; none, UNSUBSCRIBED or PENDING becomes
// ACTIVE. ErrContactNotFound when t.ID names no contact, ErrContactLimit
// when creating the contact would exceed the plan.
func (s *Store) Subscribe(ctx context.Context, l ListRef, t Target) (MembershipResult, error) {
	if t.Source == "" {
		t.Source = "api"
	}
	return s.setMembership(ctx, l, t, StatusActive, StatusActive)
}

// Signup is a sign-up through the hosted form of list l: with double opt-in
// the membership (none or UNSUBSCRIBED) becomes PENDING and a new contact is
// created PENDING; without it, as Subscribe with source "form". The caller
// sends the confirmation email when the result's Status is PENDING (also
// when it already was: a repeated sign-up resends it).
func (s *Store) Signup(ctx context.Context, l ListRef, t Target) (MembershipResult, error) {
	if t.Source == "" {
		t.Source = "form"
	}
	if l.DoubleOptIn {
		return s.setMembership(ctx, l, t, StatusPending, StatusPending)
	}
	return s.setMembership(ctx, l, t, StatusActive, StatusActive)
}

// setMembership runs, in one implicit transaction and one round trip: the
// contact creation (when t.Email is set) with createStatus, then
// set_membership.sql with target status.
func (s *Store) setMembership(ctx context.Context, l ListRef, t Target, createStatus, target string) (MembershipResult, error) {
	var res MembershipResult
	err := retryTx(ctx, func() error {
		res = MembershipResult{}
		b := &pgx.Batch{}
		var created bool
		var refused bool
		var outbox int64
		if t.Email != "" {
			custom, err := encodeCustom(t.Fields.CustomFields)
			if err != nil {
				return err
			}
			var a upsertArgs
			a.add(schemas.NewID(), UpsertInput{Email: t.Email, Fields: t.Fields, Source: t.Source, Metadata: t.Metadata}, custom, createStatus)
			a.queue(b, l.Workspace, false, membershipShard)
		}
		var email, id *string
		if t.Email != "" {
			email = &t.Email
		} else {
			id = &t.ID
		}
		b.Queue(sqlSetMembership, l.Workspace, l.ID, email, id, target)
		br := s.pool.SendBatch(ctx, b)
		defer br.Close()
		if t.Email != "" {
			rows, err := readUpserts(br)
			if err != nil {
				return fmt.Errorf("create contact: %w", err)
			}
			if len(rows) != 1 {
				return fmt.Errorf("create contact: %d result rows", len(rows))
			}
			outbox = outboxID(rows[0])
			switch rows[0].outcome {
			case "created":
				created = true
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
		res.ContactCreated, res.Outbox = created, outbox
		return br.Close()
	})
	if err == nil {
		s.fault.committed()
	}
	return res, err
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
}

// Unsubscribe moves the target's membership of list l to UNSUBSCRIBED (spec
// 3.2), keeping the row. Removed is false when there was nothing to
// unsubscribe (no contact, no membership, or already unsubscribed).
func (s *Store) Unsubscribe(ctx context.Context, l ListRef, t Target) (UnsubscribeResult, error) {
	var email, id *string
	if t.Email != "" {
		email = &t.Email
	} else {
		id = &t.ID
	}
	var r UnsubscribeResult
	err := retryTx(ctx, func() error {
		err := s.pool.QueryRow(ctx, sqlUnsubscribe, l.Workspace, l.ID, email, id).Scan(&r.ContactID, &r.Email, &r.Removed)
		if errors.Is(err, pgx.ErrNoRows) {
			r = UnsubscribeResult{}
			return nil
		}
		return err
	})
	if err != nil {
		return UnsubscribeResult{}, fmt.Errorf("unsubscribe from %s: %w", l.ID, err)
	}
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
}

// Confirm activates every PENDING membership of contact id in ws at once,
// and the contact itself when it is PENDING (spec 3.2). A repeated call
// changes nothing and returns no lists. ErrContactNotFound when the contact
// is gone.
func (s *Store) Confirm(ctx context.Context, ws, id string) (ConfirmResult, error) {
	var r ConfirmResult
	err := retryTx(ctx, func() error {
		var lists []byte
		err := s.pool.QueryRow(ctx, sqlConfirm, ws, id).Scan(&r.Email, &r.ContactConfirmed, &lists)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrContactNotFound
		}
		if err != nil {
			return fmt.Errorf("confirm contact %s: %w", id, err)
		}
		r.Lists = nil
		if err := json.Unmarshal(lists, &r.Lists); err != nil {
			return fmt.Errorf("confirm contact %s: decode lists: %w", id, err)
		}
		for i := range r.Lists {
			r.Lists[i].ConfirmedAt = r.Lists[i].ConfirmedAt.UTC()
		}
		return nil
	})
	return r, err
}
