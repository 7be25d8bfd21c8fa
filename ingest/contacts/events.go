package contacts

import (
	"encoding/json"
	"time"

	"sendstream/ingest"
	"sendstream/schemas"
)

// events builds the envelopes of one call, keyed "<workspace>:<contactId>" so
// one contact's changes stay in order: changes on schemas.TopicContacts,
// confirmation mails to send on schemas.TopicOptIn.
// Ids are derived from the state change they announce (the contact id and
// its timestamps) where a replay of the same change could occur, and from
// the request id otherwise, so nothing is ever published under two ids.
type events struct {
	ws, requestID string
	now           time.Time
	out           []ingest.Message
}

func newEvents(ws, requestID string) *events {
	return &events{ws: ws, requestID: requestID, now: time.Now().UTC()}
}

// add appends a TopicContacts envelope of typ carrying payload, encoded by
// encoding/json.
func (e *events) add(id, typ, contactID string, at time.Time, payload any) {
	b, err := json.Marshal(payload)
	e.push(schemas.TopicContacts, id, typ, contactID, at, b, err)
}

// addContact appends contact.created or contact.updated for c: one per
// upsert, so its payload is encoded without reflection.
func (e *events) addContact(id, typ string, c Contact, at time.Time, changed []string) {
	p := contactPayload(c, changed)
	b, err := schemas.AppendContactPayload(make([]byte, 0, 512), &p)
	e.push(schemas.TopicContacts, id, typ, c.ID, at, b, err)
}

// push appends the envelope for topic of payload b, which encoding produced
// with err.
func (e *events) push(topic, id, typ, contactID string, at time.Time, b []byte, err error) {
	if err != nil {
		// Payloads are plain structs of strings, times and raw JSON that
		// came out of Postgres; failing here is a programming error.
		panic("contacts: encode " + typ + ": " + err.Error())
	}
	e.out = append(e.out, ingest.Message{Topic: topic, Env: schemas.Envelope{
		ID: id, Workspace: e.ws, Type: typ, Key: e.ws + ":" + contactID, OccurredAt: at,
		CausationID: e.requestID, Payload: b, PayloadCompact: true, // json.Marshal's bytes
	}})
}

// UpsertMessages returns what an upsert announces: contact.created.v1 for a
// new contact, contact.updated.v1 when a value changed, nothing otherwise.
// Every path that upserts (this package's API, transactional sends with a
// contact) publishes them, so one change has one id and one payload shape.
func UpsertMessages(ws, requestID string, r UpsertResult) []ingest.Message {
	ev := newEvents(ws, requestID)
	switch {
	case r.Created:
		ev.created(r.Contact)
	case len(r.Changed) > 0:
		ev.updated(r.Contact, r.Changed)
	}
	return ev.out
}

// contactPayload converts a Contact for contact.created/updated.
func contactPayload(c Contact, changed []string) schemas.ContactPayload {
	return schemas.ContactPayload{
		ContactID: c.ID, Email: c.Email, FirstName: c.FirstName, Country: c.Country, Language: c.Language,
		Status: c.Status, Source: c.Source, CustomFields: rawOrEmpty(c.CustomFields), Metadata: rawOrNull(c.Metadata),
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, UpdatedFields: changed,
	}
}

// created announces a new contact (id derived from the contact id: a
// contact is created once).
func (e *events) created(c Contact) {
	e.addContact(schemas.IDFromKey(e.ws, schemas.TypeContactCreated, c.ID), schemas.TypeContactCreated, c, c.CreatedAt, nil)
}

// updated announces changed fields (id derived from the contact id and its
// new updatedAt).
func (e *events) updated(c Contact, changed []string) {
	key := c.ID + "@" + c.UpdatedAt.Format(time.RFC3339Nano)
	e.addContact(schemas.IDFromKey(e.ws, schemas.TypeContactUpdated, key), schemas.TypeContactUpdated, c, c.UpdatedAt, changed)
}

// membership announces a membership change of type typ; joined also
// publishes contact.joined_list.v1 for journey matching.
func (e *events) membership(typ string, c Contact, l ListRef, status, via, stateKey string, at time.Time, joined bool) {
	p := schemas.ListMembershipPayload{ContactID: c.ID, Email: c.Email, ListID: l.ID, ListName: l.Name, Status: status, Via: via}
	key := l.ID + "/" + c.ID + "@" + stateKey
	e.add(schemas.IDFromKey(e.ws, typ, key), typ, c.ID, at, p)
	if joined {
		e.add(schemas.IDFromKey(e.ws, schemas.TypeContactJoinedList, key), schemas.TypeContactJoinedList, c.ID, at, p)
	}
}

// confirmed announces a contact that went PENDING -> ACTIVE.
func (e *events) confirmed(id, email string, at time.Time) {
	e.add(schemas.IDFromKey(e.ws, schemas.TypeContactConfirmed, id+"@"+at.Format(time.RFC3339Nano)),
		schemas.TypeContactConfirmed, id, at, schemas.ContactConfirmedPayload{ContactID: id, Email: email})
}

// optIn asks the optin stage to send a confirmation email. It goes to a
// topic of its own, so the stage does not read every contact change.
func (e *events) optIn(p schemas.OptInRequestedPayload) {
	b, err := json.Marshal(p)
	e.push(schemas.TopicOptIn, schemas.ChildID(e.requestID, schemas.TypeOptInRequested, len(e.out)),
		schemas.TypeOptInRequested, p.ContactID, e.now, b, err)
}
