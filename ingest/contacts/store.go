package contacts

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
)

var (
	//go:embed sql/lock_for_create.sql
	sqlLockForCreate string
	//go:embed sql/upsert_contacts.sql
	sqlUpsertContacts string
	//go:embed sql/custom_fields.sql
	sqlCustomFields string
	//go:embed sql/create_custom_field.sql
	sqlCreateCustomField string
)

// sqlGenericPlans starts every statement batch: the big CTE statements cost
// more to plan (custom plans, 1-2 ms) than to run, and their generic plans
// are as good, so the batch's transaction uses the cached generic plans.
// set_config(..., true) is SET LOCAL without its warning: a batch runs in an
// implicit transaction, which SET LOCAL obeys but warns about on every call
// (hundreds of thousands of lines in the Postgres log under load).
const sqlGenericPlans = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"

// maxAttempts bounds how often one upsert is run again after a deadlock, a
// serialization failure or a concurrent creation of the same email.
const maxAttempts = 5

// batchTimeout bounds one upsert statement batch.
const batchTimeout = 30 * time.Second

// Store is the contacts domain over Postgres. It is safe for concurrent use;
// Upsert calls of one workspace are grouped into shared statements. Close it
// after the HTTP server stopped.
type Store struct {
	pool   *pgxpool.Pool
	fields fieldCache
	lists  listCache
	batch  *batcher
	cancel context.CancelFunc
	done   *outboxDeleter
	fault  fault
	scope  string // outbox scope: SetOutboxScope
	relay  sync.WaitGroup
}

// NewStore returns a Store over pool (migrated with schemas/postgres). It
// starts nothing until used.
func NewStore(pool *pgxpool.Pool) *Store {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{pool: pool, cancel: cancel}
	s.fields = fieldCache{load: s.loadFields, reloadEvery: 200 * time.Millisecond, m: map[string]*fieldSet{}}
	s.lists = listCache{ttl: 30 * time.Second, m: map[string]cachedList{}}
	s.batch = &batcher{exec: s.execUpserts, ctx: ctx, queues: map[string]*wsQueue{}}
	s.done = newOutboxDeleter(ctx, pool)
	return s
}

// SetOutboxScope sets the scope of the outbox rows this Store writes and of
// the rows its relay claims: the topic prefix of the deployment (default
// ”). Processes sharing a database but not their topics (two deployments,
// or test runs with their own prefixes) then never publish each other's
// events. Call it before the Store is used.
func (s *Store) SetOutboxScope(scope string) { s.scope = scope }

// Close waits for queued upserts to finish, stops the outbox relay, deletes
// the outbox rows of what was published, then stops. Calls after Close
// fail.
func (s *Store) Close() {
	s.batch.close()
	s.cancel()
	s.relay.Wait()
	s.done.close()
}

// CustomFieldPatch keeps the keys of raw that are defined custom fields of
// ws, each value checked and normalized for the field's type (unknown keys
// are dropped silently, spec 2.1). bad lists the keys whose value has the
// wrong type, sorted; the patch is only meaningful when bad is empty.
func (s *Store) CustomFieldPatch(ctx context.Context, ws string, raw map[string]json.RawMessage) (patch map[string]any, bad []string, err error) {
	if len(raw) == 0 {
		return nil, nil, nil
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	types, err := s.fields.types(ctx, ws, keys)
	if err != nil {
		return nil, nil, err
	}
	patch = make(map[string]any, len(raw))
	for k, v := range raw {
		typ, ok := types[k]
		if !ok {
			continue
		}
		val, ok := checkFieldValue(typ, v)
		if !ok {
			bad = append(bad, k)
			continue
		}
		patch[k] = val
	}
	sort.Strings(bad)
	return patch, bad, nil
}

// FieldType returns the type of custom field key in ws ("" when undefined).
func (s *Store) FieldType(ctx context.Context, ws, key string) (string, error) {
	t, err := s.fields.types(ctx, ws, []string{key})
	if err != nil {
		return "", err
	}
	return t[key], nil
}

func (s *Store) loadFields(ctx context.Context, ws string) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, sqlCustomFields, ws)
	if err != nil {
		return nil, fmt.Errorf("load custom fields of %s: %w", ws, err)
	}
	out := map[string]string{}
	var k, t string
	_, err = pgx.ForEachRow(rows, []any{&k, &t}, func() error { out[k] = t; return nil })
	if err != nil {
		return nil, fmt.Errorf("load custom fields of %s: %w", ws, err)
	}
	return out, nil
}

// CreateCustomField defines a custom field of ws. Defining an existing key
// again with the same type is a no-op; with another type it is ErrExists.
func (s *Store) CreateCustomField(ctx context.Context, ws, key, typ string) error {
	if !ValidFieldKey(key) {
		return fmt.Errorf("custom field key %q: want a letter then up to 63 letters, digits or underscores", key)
	}
	if !ValidFieldType(typ) {
		return fmt.Errorf("custom field type %q: want string, number, boolean or date", typ)
	}
	var got string
	if err := s.pool.QueryRow(ctx, sqlCreateCustomField, ws, key, typ).Scan(&got); err != nil {
		return fmt.Errorf("create custom field %s: %w", key, err)
	}
	s.fields.forget(ws)
	if got != typ {
		return fmt.Errorf("custom field %s is already defined as %s: %w", key, got, ErrExists)
	}
	return nil
}

// Upsert creates the contact in.Email of ws, or updates its fields (spec 2.1,
// 4.5). Concurrent calls are grouped into shared statements; the result is
// exact per call: of many concurrent upserts of one new email, exactly one
// has Created. ErrContactLimit when the contact is new and the plan's limit
// is reached; updates of existing contacts always work.
func (s *Store) Upsert(ctx context.Context, ws string, in UpsertInput) (UpsertResult, error) {
	custom, err := encodeCustom(in.Fields.CustomFields)
	if err != nil {
		return UpsertResult{}, err
	}
	p := &pending{ws: ws, in: in, custom: custom, newID: schemas.NewID(), done: make(chan upsertReply, 1)}
	if !s.batch.submit(p) {
		return UpsertResult{}, errors.New("contacts store is closed")
	}
	select {
	case r := <-p.done:
		return r.res, r.err
	case <-ctx.Done():
		p.abandoned.Store(true)
		return UpsertResult{}, fmt.Errorf("upsert contact: %w", ctx.Err())
	}
}

// upsertArgs are the array parameters of upsert_contacts.sql.
type upsertArgs struct {
	ids, emails, firstNames, countries, languages, custom, sources, metadata, statuses, requestIDs []*string
}

func (a *upsertArgs) add(newID string, in UpsertInput, custom *string, status string) {
	var meta *string
	if len(in.Metadata) > 0 {
		meta = ptr(string(in.Metadata))
	}
	var source *string
	if in.Source != "" {
		source = ptr(in.Source)
	}
	a.ids = append(a.ids, ptr(newID))
	a.emails = append(a.emails, ptr(in.Email))
	a.firstNames = append(a.firstNames, in.Fields.FirstName)
	a.countries = append(a.countries, in.Fields.Country)
	a.languages = append(a.languages, in.Fields.Language)
	a.custom = append(a.custom, custom)
	a.sources = append(a.sources, source)
	a.metadata = append(a.metadata, meta)
	a.statuses = append(a.statuses, ptr(status))
	a.requestIDs = append(a.requestIDs, ptr(in.RequestID))
}

// encodeCustom encodes a custom field patch for upsert_contacts.sql (nil
// when empty).
func encodeCustom(m map[string]any) (*string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode custom fields: %w", err)
	}
	return ptr(string(b)), nil
}

// queue adds the plan-mode setting, lock_for_create.sql and
// upsert_contacts.sql to b; readUpserts reads their results.
func (a *upsertArgs) queue(b *pgx.Batch, ws string, updateExisting bool, shard int, scope string) {
	b.Queue(sqlGenericPlans)
	b.Queue(sqlLockForCreate, ws, a.emails)
	b.Queue(sqlUpsertContacts, ws, a.ids, a.emails, a.firstNames, a.countries, a.languages,
		a.custom, a.sources, a.metadata, a.statuses, updateExisting, shard, a.requestIDs, scope)
}

// readUpserts reads the three results upsertArgs.queue queued, in order,
// and returns the upsert's rows.
func readUpserts(br pgx.BatchResults) ([]upsertRow, error) {
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("plan mode: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("lock contact stats: %w", err)
	}
	q, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("upsert contacts: %w", err)
	}
	return scanUpsertRows(q)
}

// upsertRow is one result row of upsert_contacts.sql.
type upsertRow struct {
	ord     int64
	outcome string
	outbox  *int64 // its contact_outbox row, if one was written
	c       Contact
	old     struct {
		firstName, country, language *string
		custom                       []byte
	}
}

func scanUpsertRows(rows pgx.Rows) ([]upsertRow, error) {
	defer rows.Close()
	var out []upsertRow
	for rows.Next() {
		var r upsertRow
		var id, email, status *string
		var created, updated *time.Time
		var custom, meta []byte
		if err := rows.Scan(&r.ord, &r.outcome, &id, &email, &r.c.FirstName, &r.c.Country, &r.c.Language,
			&status, &r.c.Source, &meta, &custom, &created, &updated,
			&r.old.firstName, &r.old.country, &r.old.language, &r.old.custom, &r.outbox); err != nil {
			return nil, fmt.Errorf("scan upsert result: %w", err)
		}
		if id != nil {
			r.c.ID, r.c.Email, r.c.Status = *id, *email, *status
			r.c.CreatedAt, r.c.UpdatedAt = created.UTC(), updated.UTC()
			r.c.CustomFields = rawOrEmpty(custom)
			r.c.Metadata = rawOrNull(meta)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("upsert contacts: %w", err)
	}
	return out, nil
}

// execUpserts runs one batch: lock_for_create.sql then upsert_contacts.sql
// in one implicit transaction (one round trip), and answers every item or
// puts it back in the queue (a concurrent creation of the same email, or a
// limit refusal that such a race may have caused).
func (s *Store) execUpserts(ctx context.Context, ws string, shard int, batch []*pending) {
	var a upsertArgs
	for _, p := range batch {
		a.add(p.newID, p.in, p.custom, StatusActive)
	}
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	var rows []upsertRow
	err := retryTx(ctx, func() error {
		b := &pgx.Batch{}
		a.queue(b, ws, true, shard, s.scope)
		br := s.pool.SendBatch(ctx, b)
		defer br.Close()
		var err error
		if rows, err = readUpserts(br); err != nil {
			return err
		}
		return br.Close()
	})
	if err != nil {
		for _, p := range batch {
			p.done <- upsertReply{err: err}
		}
		return
	}
	s.fault.committed()
	raced := false
	for _, r := range rows {
		raced = raced || r.outcome == "retry"
	}
	var again []*pending
	for _, r := range rows {
		p := batch[r.ord-1]
		switch r.outcome {
		case "created":
			p.done <- upsertReply{res: UpsertResult{Contact: r.c, Created: true, Outbox: outboxID(r)}}
		case "updated", "unchanged":
			p.done <- upsertReply{res: UpsertResult{Contact: r.c, Changed: changedFields(r), Outbox: outboxID(r)}}
		case "refused":
			if raced && p.attempts < maxAttempts {
				p.attempts++
				again = append(again, p)
				continue
			}
			p.done <- upsertReply{err: ErrContactLimit}
		default: // retry: created concurrently by another transaction
			if p.attempts < maxAttempts {
				p.attempts++
				again = append(again, p)
				continue
			}
			p.done <- upsertReply{err: fmt.Errorf("upsert %s: still racing after %d attempts", p.in.Email, maxAttempts)}
		}
	}
	if len(again) > 0 {
		s.batch.requeue(ws, again)
	}
}

// changedFields names what an update changed, comparing the row before and
// after (empty for creations and no-op updates).
func changedFields(r upsertRow) []string {
	if r.outcome != "updated" {
		return nil
	}
	var out []string
	if !eqStr(r.old.firstName, r.c.FirstName) {
		out = append(out, "firstName")
	}
	if !eqStr(r.old.country, r.c.Country) {
		out = append(out, "country")
	}
	if !eqStr(r.old.language, r.c.Language) {
		out = append(out, "language")
	}
	var before, after map[string]json.RawMessage
	_ = json.Unmarshal(r.old.custom, &before)
	_ = json.Unmarshal(r.c.CustomFields, &after)
	var keys []string
	for k, v := range after {
		if w, ok := before[k]; !ok || !bytes.Equal(v, w) {
			keys = append(keys, "customFields."+k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			keys = append(keys, "customFields."+k)
		}
	}
	sort.Strings(keys)
	return append(out, keys...)
}

// retryTx runs fn again after a deadlock or serialization failure, up to
// maxAttempts times, with a short growing pause.
func retryTx(ctx context.Context, fn func() error) error {
	var err error
	for i := 0; i < maxAttempts; i++ {
		if err = fn(); err == nil || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(i+1) * 2 * time.Millisecond):
		}
	}
	return err
}

func retryable(err error) bool {
	if errors.Is(err, errRace) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001"
	}
	return false
}

// listCache keeps lists by id for the paths that need a list before writing
// (404 without writing anything, the name for events). Lists are never
// deleted, so entries only refresh their name after ttl.
type listCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]cachedList
}

type cachedList struct {
	ws          string
	name        string
	doubleOptIn bool
	at          time.Time
}

func ptr[T any](v T) *T { return &v }

func eqStr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func rawOrEmpty(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return json.RawMessage(b)
}

func rawOrNull(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return json.RawMessage(b)
}

//go:embed sql/rebuild_counters.sql
var sqlRebuildCounters string

// RebuildCounters recomputes ws's contact total, seq high-water mark, page
// buckets and list counts from the rows themselves. Use it after loading
// contacts or memberships without the Store (e.g. COPY); the Store and the
// triggers keep them exact otherwise.
func (s *Store) RebuildCounters(ctx context.Context, ws string) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("rebuild counters of %s: %w", ws, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
	for _, stmt := range strings.Split(sqlRebuildCounters, "\n;\n") {
		if _, err := tx.Exec(ctx, stmt, ws); err != nil {
			return fmt.Errorf("rebuild counters of %s: %w", ws, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("rebuild counters of %s: %w", ws, err)
	}
	return nil
}
