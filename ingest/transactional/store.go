package transactional

import (
	"context"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
	pgsink "sendstream/sinks/postgres"
)

var (
	//go:embed sql/lookup_batch.sql
	sqlLookupBatch string
	//go:embed sql/claim.sql
	sqlClaim string
	//go:embed sql/claim_batch.sql
	sqlClaimBatch string
	//go:embed sql/existing.sql
	sqlExisting string
	//go:embed sql/message.sql
	sqlMessage string
	//go:embed sql/list.sql
	sqlList string
	//go:embed sql/cursor_exists.sql
	sqlCursorExists string
	//go:embed sql/template.sql
	sqlTemplate string
	//go:embed sql/template_create.sql
	sqlTemplateCreate string
	//go:embed sql/template_update.sql
	sqlTemplateUpdate string
	//go:embed sql/policy_create.sql
	sqlPolicyCreate string
	//go:embed sql/domain_add.sql
	sqlDomainAdd string
	//go:embed sql/unsubscribe.sql
	sqlUnsubscribe string
	//go:embed sql/workspace_name.sql
	sqlWorkspaceName string
	//go:embed sql/report.sql
	sqlReport string
)

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

// Errors of the Store.
var (
	ErrTemplateNotFound = errors.New("template not found")
	ErrMessageNotFound  = errors.New("message not found")
	ErrPolicyExists     = errors.New("a send policy with this key already exists")
	ErrBadCursor        = errors.New("unknown cursor")
)

// Store is the transactional domain over Postgres (SQL in sql/*.sql). It is
// safe for concurrent use. The lookups and claims of concurrent sends share
// statements (group commit: one round trip for many sends under load);
// Close stops those workers.
type Store struct {
	pool    *pgxpool.Pool
	async   *pgxpool.Pool // synchronous_commit off: claims
	lookups pgsink.Batcher[lookupIn, lookupOut]
	claims  pgsink.Batcher[NewMessage, claimOut]
}

// NewStore returns a Store over a migrated pool. It starts nothing until
// used.
//
// Claims run on a small pool of its own to the same database whose sessions
// have synchronous_commit off: a claim commits without waiting for the WAL
// flush, which takes an fsync off every send. The stored row is not what
// makes a send durable: the broker's acks=all is, and the envelope carries
// everything the row holds. If Postgres itself crashes and loses the last
// claims, the delivery stage stores the row again from the envelope before
// claiming it for hand-off (so nothing accepted is lost), and a retry with
// the same externalId maps to the same message id, so it is not sent twice.
func NewStore(pool *pgxpool.Pool) *Store {
	s := &Store{pool: pool, async: pool}
	if own, err := pgsink.LookupPool(context.Background(), pool, 6, true); err == nil {
		s.async = own
	}
	// One statement of each kind in flight: a statement's cost is mostly
	// fixed, and a second one only split concurrent sends into smaller
	// batches (transactional-e2e: 1.9 rows per statement with two, 3.1
	// with one, and 10% less Postgres time per message; the open-loop
	// latency at 1,000 sends/s did not change).
	s.lookups = pgsink.Batcher[lookupIn, lookupOut]{Workers: 1, Max: 256, Timeout: 10 * time.Second, Run: s.lookupBatch}
	s.claims = pgsink.Batcher[NewMessage, claimOut]{Workers: 1, Max: 256, Timeout: 10 * time.Second, Run: s.claimBatch}
	return s
}

// Close stops the statement workers and closes the claims' pool. Calls
// after Close fail.
func (s *Store) Close() {
	s.lookups.Close()
	s.claims.Close()
	if s.async != s.pool {
		s.async.Close()
	}
}

// Policy is a send policy. Builtin marks the default Transactional policy
// of a workspace that has no stored one.
type Policy struct {
	ID        string `json:"id"`
	Key       string `json:"key"`
	Kind      string `json:"kind"`
	FromEmail string `json:"fromEmail"`
	FromName  string `json:"fromName"`
	Provider  string `json:"provider"`
	Builtin   bool   `json:"-"`
}

// DefaultPolicyKey is the key of a workspace's default Transactional policy.
const DefaultPolicyKey = "transactional"

// BuiltinPolicy is the default Transactional policy of a workspace without
// a stored one: the SMTP provider, sender from the workspace's domains.
func BuiltinPolicy(ws string) Policy {
	return Policy{ID: schemas.IDFromKey(ws, "send-policy", DefaultPolicyKey), Key: DefaultPolicyKey,
		Kind: schemas.PolicyTransactional, Provider: "smtp", Builtin: true}
}

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
}

func scanMessage(row pgx.Row) (Message, error) {
	var m Message
	err := row.Scan(&m.ID, &m.Status, &m.To, &m.RFCMessageID, &m.ExternalID, &m.ContactID, &m.TemplateID,
		&m.PolicyID, &m.Provider, &m.FailureReason, &m.BounceType, &m.BounceReason, &m.ComplaintType,
		&m.CreatedAt, &m.SentAt, &m.DeliveredAt, &m.BouncedAt, &m.ComplainedAt, &m.FailedAt)
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

// Template is a stored template.
type Template struct {
	ID           string                 `json:"id"`
	Name         string                 `json:"name"`
	Subject      string                 `json:"subject"`
	Preheader    string                 `json:"preheader"`
	HTML         string                 `json:"html"`
	Text         string                 `json:"text"`
	Required     []string               `json:"requiredVariables"`
	Translations map[string]Translation `json:"translations"`
	Version      int64                  `json:"version"`
}

// Translation is one language's version of a template; empty parts fall
// back to the template's own.
type Translation struct {
	Subject   string `json:"subject,omitempty"`
	Preheader string `json:"preheader,omitempty"`
	HTML      string `json:"html,omitempty"`
	Text      string `json:"text,omitempty"`
}

// Template reads a template.
func (s *Store) Template(ctx context.Context, ws, id string) (Template, error) {
	var t Template
	var tr []byte
	err := s.pool.QueryRow(ctx, sqlTemplate, ws, id).
		Scan(&t.ID, &t.Name, &t.Subject, &t.Preheader, &t.HTML, &t.Text, &t.Required, &tr, &t.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, ErrTemplateNotFound
	}
	if err != nil {
		return t, fmt.Errorf("read template %s: %w", id, err)
	}
	if err := json.Unmarshal(tr, &t.Translations); err != nil {
		return t, fmt.Errorf("read template %s: translations: %w", id, err)
	}
	return t, nil
}

// CreateTemplate stores t (validated by the caller) and returns its id.
func (s *Store) CreateTemplate(ctx context.Context, ws string, t Template) (string, error) {
	id := schemas.NewID()
	tr, err := json.Marshal(nonNilTranslations(t.Translations))
	if err != nil {
		return "", err
	}
	if _, err := s.pool.Exec(ctx, sqlTemplateCreate, id, ws, t.Name, t.Subject, t.Preheader, t.HTML, t.Text,
		nonNil(t.Required), tr); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	return id, nil
}

// UpdateTemplate replaces a template's content and returns its new version.
func (s *Store) UpdateTemplate(ctx context.Context, ws, id string, t Template) (int64, error) {
	tr, err := json.Marshal(nonNilTranslations(t.Translations))
	if err != nil {
		return 0, err
	}
	var v int64
	err = s.pool.QueryRow(ctx, sqlTemplateUpdate, ws, id, t.Name, t.Subject, t.Preheader, t.HTML, t.Text,
		nonNil(t.Required), tr).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrTemplateNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("update template: %w", err)
	}
	return v, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilTranslations(m map[string]Translation) map[string]Translation {
	if m == nil {
		return map[string]Translation{}
	}
	return m
}

// CreatePolicy stores a send policy and returns its id.
func (s *Store) CreatePolicy(ctx context.Context, ws string, p Policy) (string, error) {
	id := schemas.NewID()
	if p.Provider == "" {
		p.Provider = "smtp"
	}
	_, err := s.pool.Exec(ctx, sqlPolicyCreate, id, ws, p.Key, p.Kind, p.FromEmail, p.FromName, p.Provider)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return "", ErrPolicyExists
	}
	if err != nil {
		return "", fmt.Errorf("create send policy: %w", err)
	}
	return id, nil
}

// Domain is a sending domain with its DKIM selector and key.
type Domain struct {
	Domain     string
	Selector   string
	PrivateKey string // PEM
}

// AddDomain adds a sending domain with its DKIM key; adding an existing
// domain keeps its key. It returns the domain as stored.
func (s *Store) AddDomain(ctx context.Context, ws string, d Domain) (Domain, error) {
	out := Domain{Domain: d.Domain}
	err := s.pool.QueryRow(ctx, sqlDomainAdd, ws, d.Domain, d.Selector, nullable(d.PrivateKey)).Scan(&out.Selector, &out.PrivateKey)
	if err != nil {
		return out, fmt.Errorf("add domain %s: %w", d.Domain, err)
	}
	return out, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Unsubscribe suppresses email for marketing in ws and marks its contact
// UNSUBSCRIBED. found is false when the workspace does not exist.
func (s *Store) Unsubscribe(ctx context.Context, ws, email, messageID string) (workspaceName string, found bool, err error) {
	var name, contactID *string
	if err := s.pool.QueryRow(ctx, sqlUnsubscribe, ws, email, messageID).Scan(&name, &contactID); err != nil {
		return "", false, fmt.Errorf("unsubscribe: %w", err)
	}
	if name == nil {
		return "", false, nil
	}
	return *name, true, nil
}

// WorkspaceName returns a workspace's name; found false when it is gone.
func (s *Store) WorkspaceName(ctx context.Context, ws string) (string, bool, error) {
	var name string
	err := s.pool.QueryRow(ctx, sqlWorkspaceName, ws).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read workspace: %w", err)
	}
	return name, true, nil
}

// Report is one provider report to apply.
type Report struct {
	Ref           string // service message id or Message-ID
	Workspace     string // "" when the report is not tied to a workspace (SES)
	Status        string // delivered, bounced or complained
	At            time.Time
	BounceType    string // hard or soft
	Reason        string
	ComplaintType string
	Email         string // the reported address
}

// ReportResult is what applying a report did.
type ReportResult struct {
	Found      bool
	Moved      bool   // the status changed
	Previous   string // the status before
	MessageID  string
	Workspace  string
	To         string
	RFCID      string
	ExternalID string
	TemplateID string
	PolicyID   string
	Provider   string
}

// ApplyReport moves a message per a provider report and suppresses the
// address on a hard bounce or complaint (see sql/report.sql).
func (s *Store) ApplyReport(ctx context.Context, r Report) (ReportResult, error) {
	var out ReportResult
	err := s.pool.QueryRow(ctx, sqlReport, r.Ref, r.Workspace, r.Status, r.At, r.BounceType, r.Reason, r.ComplaintType, r.Email).
		Scan(&out.MessageID, &out.Workspace, &out.To, &out.RFCID, &out.ExternalID, &out.TemplateID, &out.PolicyID,
			&out.Provider, &out.Previous, &out.Moved)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("apply report: %w", err)
	}
	out.Found = true
	return out, nil
}

// requestHashHex encodes a request hash as stored.
func requestHashHex(h []byte) string { return hex.EncodeToString(h) }
