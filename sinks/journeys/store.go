// Package journeys keeps journeys and their executions in Postgres (issue
// 26; migration 0060): definitions and their immutable versions, trigger
// keys (only their SHA-256), the re-entry guard and executions. The
// operator commands (ingest/journeys) create and change journeys; the
// trigger endpoint (ingest/journeys) and the matching stage start
// executions with Start inside a transaction of their own, so the
// announcement of a start commits with it; the execution engine reads
// versions (Version) and ends executions (Finish).
//
// Both ingest and stages may use this package: it imports only schemas and
// the Postgres driver.
package journeys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
)

var (
	//go:embed sql/journey_insert.sql
	sqlJourneyInsert string
	//go:embed sql/journey_lock.sql
	sqlJourneyLock string
	//go:embed sql/journey_update.sql
	sqlJourneyUpdate string
	//go:embed sql/journey_set_status.sql
	sqlJourneySetStatus string
	//go:embed sql/journey_get.sql
	sqlJourneyGet string
	//go:embed sql/journey_by_key.sql
	sqlJourneyByKey string
	//go:embed sql/version_get.sql
	sqlVersionGet string
	//go:embed sql/refs_missing.sql
	sqlRefsMissing string
)

// TriggerKeyPrefix starts every journey trigger key (spec 2.7, 5.2).
const TriggerKeyPrefix = "ss_jtk_"

// Errors of journey changes.
var (
	// ErrNotFound: no such journey in the workspace.
	ErrNotFound = errors.New("journey not found")
	// ErrArchived: an archived journey cannot change any more.
	ErrArchived = errors.New("the journey is archived; create a new one")
)

// StatusError is a status change the journey's current status does not
// allow (pausing a draft, activating an archived journey).
type StatusError struct{ From, To string }

func (e *StatusError) Error() string {
	return fmt.Sprintf("a %s journey cannot become %s", e.From, e.To)
}

// Journey is one journey's row.
type Journey struct {
	ID            string    `json:"id"`
	Workspace     string    `json:"workspaceId"`
	Name          string    `json:"name"`
	Status        string    `json:"status"`
	TriggerType   string    `json:"triggerType"`
	TriggerEvent  string    `json:"triggerEvent,omitempty"`
	TriggerListID string    `json:"triggerListId,omitempty"`
	Reentry       string    `json:"reentry"`
	HasTriggerKey bool      `json:"hasTriggerKey"`
	Version       int       `json:"version"`
	CreatedAt     time.Time `json:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt"`
}

// Store keeps journeys and executions. Safe for concurrent use once
// configured.
type Store struct {
	pg    *pgxpool.Pool
	now   func() time.Time
	scope string // outbox scope of archive cancellations: SetOutboxScope
}

// NewStore returns a Store on pg. now is the clock (nil: time.Now).
func NewStore(pg *pgxpool.Pool, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{pg: pg, now: now}
}

// HashTriggerKey is the stored form of a trigger key.
func HashTriggerKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// newTriggerKey mints a trigger key: the prefix and 32 random bytes.
func newTriggerKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("mint a trigger key: %w", err)
	}
	return TriggerKeyPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// nullable is s, or nil for "".
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// CheckRefs returns a schemas.JourneyErrors naming every template, list and
// send policy d names that workspace ws does not have (nil when all
// exist).
func (s *Store) CheckRefs(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, ws string, d *schemas.JourneyDefinition) error {
	refs := d.Refs()
	rows, err := q.Query(ctx, sqlRefsMissing, ws, keys(refs.Templates), keys(refs.Lists), keys(refs.SendPolicies))
	if err != nil {
		return fmt.Errorf("check the journey's references: %w", err)
	}
	var errs schemas.JourneyErrors
	for rows.Next() {
		var kind, id string
		if err := rows.Scan(&kind, &id); err != nil {
			rows.Close()
			return fmt.Errorf("check the journey's references: %w", err)
		}
		var paths []string
		var msg string
		switch kind {
		case "template":
			paths, msg = refs.Templates[id], "no template "+id+" in this workspace"
		case "list":
			paths, msg = refs.Lists[id], "no list "+id+" in this workspace"
		default:
			paths, msg = refs.SendPolicies[id], "no send policy with key or id "+id+" in this workspace"
		}
		for _, p := range paths {
			errs = append(errs, schemas.JourneyError{Path: p, Msg: msg})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check the journey's references: %w", err)
	}
	if len(errs) == 0 {
		return nil
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Path < errs[j].Path })
	return errs
}

func keys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Create stores d as a new journey of workspace ws at version 1 and returns
// it with its trigger key: minted for an api_event journey (shown this
// once; only its hash is kept), "" otherwise. References to templates,
// lists and send policies the workspace lacks are refused as
// schemas.JourneyErrors.
func (s *Store) Create(ctx context.Context, ws string, d schemas.JourneyDefinition) (Journey, string, error) {
	canon, err := json.Marshal(d)
	if err != nil {
		return Journey{}, "", fmt.Errorf("encode the journey: %w", err)
	}
	var key string
	var hash []byte
	if d.Trigger.Type == schemas.TriggerAPIEvent {
		if key, err = newTriggerKey(); err != nil {
			return Journey{}, "", err
		}
		hash = HashTriggerKey(key)
	}
	id, now := schemas.NewID(), s.now().UTC()
	err = pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		if err := s.CheckRefs(ctx, tx, ws, &d); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sqlJourneyInsert, id, ws, d.Name, d.Status, d.Trigger.Type, nullable(d.TriggerEventName()),
			nullable(d.Trigger.ListID), d.Reentry, hash, string(canon), now)
		return err
	})
	if err != nil {
		return Journey{}, "", fmt.Errorf("create journey: %w", err)
	}
	j, err := s.Get(ctx, ws, id)
	return j, key, err
}

// Update makes d the journey's new current version and returns the
// journey. Executions already running stay on their version. The status of
// d must be one the journey may move to (see SetStatus). A journey that
// becomes an api_event journey without a trigger key gets one, returned
// here (shown once); otherwise the key is "".
func (s *Store) Update(ctx context.Context, ws, id string, d schemas.JourneyDefinition) (Journey, string, error) {
	canon, err := json.Marshal(d)
	if err != nil {
		return Journey{}, "", fmt.Errorf("encode the journey: %w", err)
	}
	var key string
	now := s.now().UTC()
	err = pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		var status, trigger string
		var hasKey bool
		var version int
		if err := tx.QueryRow(ctx, sqlJourneyLock, ws, id).Scan(&status, &trigger, &hasKey, &version); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		if status == schemas.JourneyArchived {
			return ErrArchived
		}
		if err := checkTransition(status, d.Status); err != nil {
			return err
		}
		if err := s.CheckRefs(ctx, tx, ws, &d); err != nil {
			return err
		}
		var hash []byte
		if d.Trigger.Type == schemas.TriggerAPIEvent && !hasKey {
			if key, err = newTriggerKey(); err != nil {
				return err
			}
			hash = HashTriggerKey(key)
		}
		if d.Status == schemas.JourneyArchived && status != schemas.JourneyArchived {
			if err := s.cancelAll(ctx, tx, id, now); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, sqlJourneyUpdate, id, d.Name, d.Status, d.Trigger.Type, nullable(d.TriggerEventName()),
			nullable(d.Trigger.ListID), d.Reentry, hash, string(canon), now)
		return err
	})
	if err != nil {
		return Journey{}, "", fmt.Errorf("update journey %s: %w", id, err)
	}
	j, err := s.Get(ctx, ws, id)
	return j, key, err
}

// checkTransition says whether a journey in status from may move to to:
// draft and paused journeys activate, active ones pause, any archives, and
// a status may stay as it is; nothing leaves archived.
func checkTransition(from, to string) error {
	switch {
	case from == to && from != schemas.JourneyArchived:
		return nil
	case from == schemas.JourneyArchived:
		return ErrArchived
	case to == schemas.JourneyArchived:
		return nil
	case to == schemas.JourneyActive && (from == schemas.JourneyDraft || from == schemas.JourneyPaused):
		return nil
	case to == schemas.JourneyPaused && from == schemas.JourneyActive:
		return nil
	}
	return &StatusError{From: from, To: to}
}

// SetStatus moves journey id of workspace ws to status (activate, pause,
// archive) and returns it. Archiving ends the journey's active executions
// as cancelled in the same transaction, which also writes one
// cancellation per execution into the contacts outbox (cancel.go).
// Setting the status it has is a no-op; ErrArchived or a *StatusError
// refuse a move the rules forbid.
func (s *Store) SetStatus(ctx context.Context, ws, id, status string) (Journey, error) {
	now := s.now().UTC()
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		var cur, trigger string
		var hasKey bool
		var version int
		if err := tx.QueryRow(ctx, sqlJourneyLock, ws, id).Scan(&cur, &trigger, &hasKey, &version); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		if cur == schemas.JourneyArchived && status == schemas.JourneyArchived {
			return nil
		}
		if err := checkTransition(cur, status); err != nil {
			return err
		}
		if cur == status {
			return nil
		}
		if status == schemas.JourneyArchived {
			if err := s.cancelAll(ctx, tx, id, now); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, sqlJourneySetStatus, id, status, now)
		return err
	})
	if err != nil {
		return Journey{}, fmt.Errorf("set journey %s %s: %w", id, status, err)
	}
	return s.Get(ctx, ws, id)
}

func scanJourney(row pgx.Row) (Journey, error) {
	var j Journey
	err := row.Scan(&j.ID, &j.Workspace, &j.Name, &j.Status, &j.TriggerType, &j.TriggerEvent, &j.TriggerListID,
		&j.Reentry, &j.HasTriggerKey, &j.Version, &j.CreatedAt, &j.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Journey{}, ErrNotFound
	}
	j.CreatedAt, j.UpdatedAt = j.CreatedAt.UTC(), j.UpdatedAt.UTC()
	return j, err
}

// Get returns journey id of workspace ws, or ErrNotFound.
func (s *Store) Get(ctx context.Context, ws, id string) (Journey, error) {
	j, err := scanJourney(s.pg.QueryRow(ctx, sqlJourneyGet, ws, id))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Journey{}, fmt.Errorf("journey %s: %w", id, err)
	}
	return j, err
}

// ByTriggerKey returns the journey whose trigger key is key, of any
// workspace (the caller compares workspaces), or ErrNotFound.
func (s *Store) ByTriggerKey(ctx context.Context, key string) (Journey, error) {
	j, err := scanJourney(s.pg.QueryRow(ctx, sqlJourneyByKey, HashTriggerKey(key)))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Journey{}, fmt.Errorf("journey by trigger key: %w", err)
	}
	return j, err
}

// Version returns the definition of version v of journey id (the engine
// runs an execution on the version it started with), or ErrNotFound.
func (s *Store) Version(ctx context.Context, id string, v int) (schemas.JourneyDefinition, error) {
	var raw []byte
	err := s.pg.QueryRow(ctx, sqlVersionGet, id, v).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return schemas.JourneyDefinition{}, ErrNotFound
	}
	if err != nil {
		return schemas.JourneyDefinition{}, fmt.Errorf("journey %s version %d: %w", id, v, err)
	}
	d, err := schemas.ParseJourney(raw)
	if err != nil {
		return schemas.JourneyDefinition{}, fmt.Errorf("journey %s version %d: stored definition: %w", id, v, err)
	}
	return d, nil
}
