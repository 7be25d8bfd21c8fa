package contacts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"sendstream/ingest"
	"sendstream/pipeline"
	"sendstream/schemas"
)

// StageWriter is pipeline.ContactWriter over a Store: the journey engine's
// update_contact, add_to_list and remove_from_list steps change contacts
// through the same Upsert, Subscribe and Unsubscribe as POST /v1/contacts
// and /v1/lists/{id}/subscribe|unsubscribe, with the same events written
// to the contacts outbox in the change's transaction. The outbox rows are
// left to the relay (it publishes them again after its grace period under
// the same ids): the stage returns the events and the runner publishes
// them, after which nothing tells this Store, and a stage that died before
// publishing must not lose them.
type StageWriter struct{ s *Store }

var _ pipeline.ContactWriter = StageWriter{}

// NewStageWriter returns the ContactWriter over s.
func NewStageWriter(s *Store) StageWriter { return StageWriter{s: s} }

// envelopes are the envelopes of msgs (all for TopicContacts).
func envelopes(msgs []ingest.Message) []schemas.Envelope {
	out := make([]schemas.Envelope, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, m.Env)
	}
	return out
}

// UpdateContact applies set to the contact with email in ws as POST
// /v1/contacts would (null clears a field; a custom field the workspace
// lacks or of the wrong type refuses the whole change).
func (w StageWriter) UpdateContact(ctx context.Context, ws, email string, set schemas.JourneyContactSet, key string) ([]schemas.Envelope, string, error) {
	var f Fields
	for _, p := range []struct {
		raw  *json.RawMessage
		dst  **string
		name string
	}{{set.FirstName, &f.FirstName, "firstName"}, {set.Country, &f.Country, "country"}, {set.Language, &f.Language, "language"}} {
		if p.raw == nil {
			continue
		}
		var v *string
		if err := json.Unmarshal(*p.raw, &v); err != nil {
			return nil, p.name + " must be a string or null", nil
		}
		if v == nil {
			v = new(string) // null clears
		}
		*p.dst = v
	}
	if len(set.CustomFields) > 0 {
		patch, bad, err := w.s.CustomFieldPatch(ctx, ws, set.CustomFields)
		if err != nil {
			return nil, "", fmt.Errorf("update contact: %w", err)
		}
		if len(bad) > 0 {
			return nil, "custom fields the workspace lacks or of the wrong type: " + strings.Join(bad, ", "), nil
		}
		f.CustomFields = patch
	}
	if field, msg, err := w.s.CheckGrowth(ctx, ws, email, f); err != nil {
		return nil, "", fmt.Errorf("update contact: %w", err)
	} else if field != "" {
		return nil, field + " " + msg, nil
	}
	r, err := w.s.Upsert(ctx, ws, UpsertInput{Email: email, Fields: f, Source: "journey", RequestID: key})
	if errors.Is(err, ErrContactLimit) {
		return nil, "the workspace's contact limit is reached", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("update contact: %w", err)
	}
	return envelopes(UpsertMessages(ws, key, r)), "", nil
}

// SetListMembership subscribes contact id to list (member) as POST
// /v1/lists/{id}/subscribe does, or unsubscribes it as
// /v1/lists/{id}/unsubscribe does, with the same events.
func (w StageWriter) SetListMembership(ctx context.Context, ws, id, list string, member bool, key string) ([]schemas.Envelope, string, error) {
	l, err := w.s.List(ctx, ws, list)
	if errors.Is(err, ErrListNotFound) {
		return nil, "no list " + list + " in this workspace", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("list %s: %w", list, err)
	}
	// Via is "api": the webhook catalogue's membership events know api,
	// form and confirmation only.
	t := Target{ID: id, Source: "journey"}
	if member {
		r, err := w.s.Subscribe(ctx, l, t, func(r MembershipResult) []ingest.Message {
			if !r.Changed {
				return nil
			}
			ev := newEvents(ws, key)
			ev.membership(schemas.TypeContactAddedToList, r.Contact, l, r.Status, "api", key, ev.now, true)
			return ev.out
		})
		if errors.Is(err, ErrContactNotFound) {
			return nil, "the contact is gone", nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("subscribe to %s: %w", list, err)
		}
		return envelopes(r.Events), "", nil
	}
	r, err := w.s.Unsubscribe(ctx, l, t, func(r UnsubscribeResult) []ingest.Message {
		if !r.Removed {
			return nil
		}
		ev := newEvents(ws, key)
		ev.membership(schemas.TypeContactRemovedFromList, Contact{ID: r.ContactID, Email: r.Email}, l,
			StatusUnsubscribed, "api", key, ev.now, false)
		return ev.out
	})
	if err != nil {
		return nil, "", fmt.Errorf("unsubscribe from %s: %w", list, err)
	}
	return envelopes(r.Events), "", nil
}
