package events

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"sendstream/deploy/metrics"
	pgsink "sendstream/sinks/postgres"
)

var (
	//go:embed sql/resolve.sql
	sqlResolve string
	//go:embed sql/match.sql
	sqlMatch string
)

// Lookup is what one event needs resolved before it is accepted: its
// contact and, with an externalId, its idempotency claim.
type Lookup struct {
	Workspace string
	Email     string // normalised; "" when absent
	ContactID string // "" when absent
	// EventID is set only for an event with an externalId: its derived id
	// (schemas.IDFromKey(workspace, schemas.EventIDScope, externalId)),
	// which is also the claim's key.
	EventID string
}

// Resolution answers a Lookup.
type Resolution struct {
	// ContactID is the matched contact: for a duplicate, the one the first
	// request matched. "" when none.
	ContactID string
	// EventID is the event's id: for a duplicate, the original's.
	EventID string
	// Duplicate is true when the externalId was claimed before.
	Duplicate bool
	// Fresh is true for a duplicate whose claim is younger than the
	// republish window: the original may not have been published (its
	// request failed or its process died after the claim), so the duplicate
	// publishes again with the same id; stages keep the first.
	Fresh bool
}

// ErrUnavailable wraps failures to reach Postgres: nothing was decided and
// the caller answers 503.
var ErrUnavailable = errors.New("event store unavailable")

// StoreConfig tunes a Store. Zero values take the defaults.
type StoreConfig struct {
	// MaxBatch caps the events of one resolve statement (default 512).
	MaxBatch int
	// MaxInFlight caps concurrent resolve statements (default 2).
	MaxInFlight int
	// RepublishWindow is how long after a claim a duplicate still
	// republishes the event (default 24h).
	RepublishWindow time.Duration
	// Metrics receives sendstream_events_resolve_seconds (statement time)
	// and sendstream_events_resolve_batch (events per statement) (default
	// prometheus.DefaultRegisterer; Stores sharing a registerer share
	// them).
	Metrics prometheus.Registerer
}

func (c *StoreConfig) defaults() {
	if c.MaxBatch <= 0 {
		c.MaxBatch = 512
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 2
	}
	if c.RepublishWindow <= 0 {
		c.RepublishWindow = 24 * time.Hour
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.DefaultRegisterer
	}
}

// Store resolves contacts and externalId claims against Postgres with group
// commit: lookups of concurrent requests queue up and every statement takes
// whatever is queued (up to MaxBatch), so each request costs at most one
// round trip and the statements per second stay far below the requests per
// second under load. Safe for concurrent use.
type Store struct {
	pg        *pgxpool.Pool
	cfg       StoreConfig
	mDuration prometheus.Histogram
	mBatch    prometheus.Histogram

	mu       sync.Mutex
	queue    []*request
	inFlight int
}

// NewStore returns a Store over the database of pg (migrations of
// schemas/postgres applied). It opens its own small pool to that database
// (MaxInFlight connections) whose sessions run with synchronous_commit off
// and generic plans:
// a claim commits without waiting for the WAL flush, which takes the fsync
// off every request. That is safe because the claim is not what makes an
// event durable (the broker's acks=all is) and the event id is derived from
// the externalId: if Postgres itself crashes and loses the last claims, a
// retry claims again and republishes under the same id, which the stages
// drop as a copy. Only the 201-versus-200 answer of such a retry differs.
// Call Close when done.
func NewStore(pg *pgxpool.Pool, cfg StoreConfig) (*Store, error) {
	cfg.defaults()
	// The resolve statement: index lookups and claims per row.
	own, err := pgsink.LookupPool(context.Background(), pg, cfg.MaxInFlight, true)
	if err != nil {
		return nil, fmt.Errorf("events store: open pool: %w", err)
	}
	return &Store{
		pg: own, cfg: cfg,
		mDuration: metrics.Register(cfg.Metrics, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sendstream_events_resolve_seconds",
			Help:    "Time of one contact/claim resolve statement (group commit of concurrent event requests).",
			Buckets: metrics.LatencyBuckets,
		})),
		mBatch: metrics.Register(cfg.Metrics, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sendstream_events_resolve_batch", Help: "Events resolved by one statement.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		})),
	}, nil
}

// Close closes the Store's pool. Resolve must not be called after.
func (s *Store) Close() { s.pg.Close() }

// request is one caller's lookups; done is closed once out and err are set.
type request struct {
	in   []Lookup
	out  []Resolution
	err  error
	done chan struct{}
}

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

// Resolve resolves every lookup of one call (one event, or the rows of an
// import) in one statement shared with concurrent callers, writing out[i]
// for in[i]. Lookups with neither contact nor externalId resolve to nothing
// without Postgres. Repeats of one claim (event id) within in or within a
// shared statement resolve as duplicates of the first. An error
// wraps ErrUnavailable; some claims may have been made then (a retry finds
// them and republishes, see Resolution.Fresh).
func (s *Store) Resolve(ctx context.Context, in []Lookup, out []Resolution) error {
	need := false
	for i := range in {
		if in[i].Email != "" || in[i].ContactID != "" || in[i].EventID != "" {
			need = true
			break
		}
	}
	if !need {
		for i := range out[:len(in)] {
			out[i] = Resolution{}
		}
		return nil
	}
	r := requestPool.Get().(*request)
	r.in, r.out, r.err = in, out[:len(in)], nil
	s.mu.Lock()
	s.queue = append(s.queue, r)
	if s.inFlight < s.cfg.MaxInFlight {
		s.inFlight++
		go s.drain()
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		err := r.err
		r.in, r.out, r.err = nil, nil, nil
		requestPool.Put(r)
		return err
	case <-ctx.Done():
		// r stays with the drainer, which completes it later; not reused.
		return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	}
}

// drain runs statements while requests are queued; up to MaxInFlight
// drainers run at once.
func (s *Store) drain() {
	var batch []*request
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.inFlight--
			s.mu.Unlock()
			return
		}
		n, k := 0, 0
		for k < len(s.queue) && (k == 0 || n+len(s.queue[k].in) <= s.cfg.MaxBatch) {
			n += len(s.queue[k].in)
			k++
		}
		batch = append(batch[:0], s.queue[:k]...)
		rest := copy(s.queue, s.queue[k:])
		clear(s.queue[rest:])
		s.queue = s.queue[:rest]
		s.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := s.run(ctx, batch)
		cancel()
		for _, r := range batch {
			r.err = err
			r.done <- struct{}{}
		}
		clear(batch)
	}
}

// run resolves every lookup of batch in one statement.
func (s *Store) run(ctx context.Context, batch []*request) error {
	n := 0
	for _, r := range batch {
		n += len(r.in)
	}
	ws := make([]string, 0, n)
	email := make([]string, 0, n)
	contact := make([]string, 0, n)
	evid := make([]string, 0, n)
	// Fold repeats of one claim (one event id) onto their first occurrence:
	// first[i] is the index (in the flat order) of the row that claims for
	// row i, or -1 when row i is its own.
	var seen map[string]int
	first := make([]int, n)
	rowOf := make([]int, 0, n) // statement row -> flat index
	flat := 0
	for _, r := range batch {
		for i := range r.in {
			l := &r.in[i]
			first[flat] = -1
			if l.Email == "" && l.ContactID == "" && l.EventID == "" {
				flat++
				continue
			}
			if l.EventID != "" {
				if seen == nil {
					seen = make(map[string]int)
				}
				if j, ok := seen[l.EventID]; ok {
					first[flat] = j
					flat++
					continue
				}
				seen[l.EventID] = flat
			}
			ws = append(ws, l.Workspace)
			email = append(email, l.Email)
			contact = append(contact, l.ContactID)
			evid = append(evid, l.EventID)
			rowOf = append(rowOf, flat)
			flat++
		}
	}
	res := make([]Resolution, n)
	if len(ws) > 0 {
		start := time.Now()
		defer func() { s.mDuration.Observe(time.Since(start).Seconds()); s.mBatch.Observe(float64(len(ws))) }()
		var rows pgx.Rows
		var err error
		if slices.ContainsFunc(evid, func(id string) bool { return id != "" }) {
			rows, err = s.pg.Query(ctx, sqlResolve, ws, email, contact, evid, s.cfg.RepublishWindow.Seconds())
		} else {
			rows, err = s.pg.Query(ctx, sqlMatch, ws, email, contact)
		}
		if err != nil {
			return fmt.Errorf("%w: resolve %d events: %w", ErrUnavailable, len(ws), err)
		}
		var (
			ord                      int64
			matched, claimCont       string
			claimed, inserted, fresh bool
		)
		_, err = pgx.ForEachRow(rows, []any{&ord, &matched, &claimed, &claimCont, &inserted, &fresh}, func() error {
			if ord < 1 || int(ord) > len(rowOf) {
				return fmt.Errorf("resolve: row %d out of range", ord)
			}
			k := rowOf[ord-1]
			r := &res[k]
			if !claimed {
				r.ContactID = matched
				return nil
			}
			r.EventID = evid[ord-1]
			r.ContactID = claimCont
			r.Duplicate = !inserted
			r.Fresh = fresh
			return nil
		})
		if err != nil {
			return fmt.Errorf("%w: resolve %d events: %w", ErrUnavailable, len(ws), err)
		}
	}
	// Repeats within the batch are duplicates of their first occurrence.
	for i, j := range first {
		if j >= 0 {
			res[i] = res[j]
			res[i].Duplicate = true
			res[i].Fresh = true
		}
	}
	flat = 0
	for _, r := range batch {
		flat += copy(r.out, res[flat:flat+len(r.in)])
	}
	return nil
}
