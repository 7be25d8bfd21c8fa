package auth

import (
	"context"
	"crypto/subtle"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
)

var (
	//go:embed sql/create_workspace.sql
	sqlCreateWorkspace string
	//go:embed sql/set_suspended.sql
	sqlSetSuspended string
	//go:embed sql/create_api_key.sql
	sqlCreateAPIKey string
	//go:embed sql/delete_api_key.sql
	sqlDeleteAPIKey string
	//go:embed sql/create_tracking_token.sql
	sqlCreateTrackingToken string
	//go:embed sql/lookup_api_key.sql
	sqlLookupAPIKey string
	//go:embed sql/lookup_tracking_token.sql
	sqlLookupTrackingToken string
	//go:embed sql/workspace_exists.sql
	sqlWorkspaceExists string
)

// Store reads and changes workspaces, members and credentials in Postgres
// (tables of schemas/postgres/0001_core.sql). It is safe for concurrent use.
// The admin CLI and tests call its Create/Delete methods; Cache calls Resolve.
type Store struct {
	pg *pgxpool.Pool
}

// NewStore returns a Store on pg.
func NewStore(pg *pgxpool.Pool) *Store { return &Store{pg: pg} }

// NewWorkspace describes a workspace to create.
type NewWorkspace struct {
	Name string
	Plan string // free (default), pro or enterprise
	// ContactLimit overrides the plan's default when not nil; 0 is unlimited.
	ContactLimit *int64
	// RateMultiplier overrides the plan's default when above 0.
	RateMultiplier int64
}

// CreateWorkspace creates a workspace and its first API key (full access,
// named "default") in one transaction, and returns the workspace id and the
// key in plain text (shown once).
func (s *Store) CreateWorkspace(ctx context.Context, w NewWorkspace) (workspaceID, apiKey string, err error) {
	w.Name = strings.TrimSpace(w.Name)
	if w.Name == "" {
		return "", "", errors.New("create workspace: name is required")
	}
	if w.Plan == "" {
		w.Plan = PlanFree
	}
	limit, mult, ok := PlanDefaults(w.Plan)
	if !ok {
		return "", "", fmt.Errorf("create workspace: unknown plan %q (want free, pro or enterprise)", w.Plan)
	}
	if w.ContactLimit != nil {
		if *w.ContactLimit < 0 {
			return "", "", errors.New("create workspace: contact limit must be 0 (unlimited) or more")
		}
		limit = *w.ContactLimit
	}
	if w.RateMultiplier < 0 {
		return "", "", errors.New("create workspace: rate multiplier must be at least 1")
	}
	if w.RateMultiplier > 0 {
		mult = w.RateMultiplier
	}
	id := schemas.NewID()
	key, err := newToken(APIKeyPrefix)
	if err != nil {
		return "", "", err
	}
	h := Hash(key)
	err = pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlCreateWorkspace, id, w.Name, w.Plan, limit, mult); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sqlCreateAPIKey, schemas.NewID(), id, "default", h[:], hint(key), []string{}, nil)
		return err
	})
	if err != nil {
		return "", "", fmt.Errorf("create workspace %q: %w", w.Name, err)
	}
	return id, key, nil
}

// SetSuspended suspends or resumes a workspace. Every credential of a
// suspended workspace answers 403 TEAM_SUSPENDED within the key-cache TTL.
func (s *Store) SetSuspended(ctx context.Context, workspaceID string, suspended bool) error {
	tag, err := s.pg.Exec(ctx, sqlSetSuspended, workspaceID, suspended)
	if err != nil {
		return fmt.Errorf("set workspace %s suspended=%v: %w", workspaceID, suspended, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("workspace %s: %w", workspaceID, ErrNotFound)
	}
	return nil
}

// CreateAPIKey creates an API key in a workspace and returns its id and the
// key in plain text (shown once). scopes must be spec 5.1 scopes (none means
// full access); expiresAt nil means the key never expires.
func (s *Store) CreateAPIKey(ctx context.Context, workspaceID, name string, scopes []string, expiresAt *time.Time) (id, key string, err error) {
	clean := make([]string, 0, len(scopes))
	for _, sc := range scopes {
		sc = strings.TrimSpace(sc)
		if sc == "" {
			continue
		}
		if !ValidScope(sc) {
			return "", "", fmt.Errorf("create api key: unknown scope %q (valid: %s)", sc, strings.Join(Scopes, ", "))
		}
		clean = append(clean, sc)
	}
	key, err = newToken(APIKeyPrefix)
	if err != nil {
		return "", "", err
	}
	id = schemas.NewID()
	h := Hash(key)
	if _, err := s.pg.Exec(ctx, sqlCreateAPIKey, id, workspaceID, name, h[:], hint(key), clean, expiresAt); err != nil {
		return "", "", fmt.Errorf("create api key in workspace %s: %w", workspaceID, notFoundOnFK(err))
	}
	return id, key, nil
}

// DeleteAPIKey deletes a key; it stops authenticating within the key-cache
// TTL. ErrNotFound when the workspace has no such key.
func (s *Store) DeleteAPIKey(ctx context.Context, workspaceID, keyID string) error {
	tag, err := s.pg.Exec(ctx, sqlDeleteAPIKey, workspaceID, keyID)
	if err != nil {
		return fmt.Errorf("delete api key %s: %w", keyID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("api key %s in workspace %s: %w", keyID, workspaceID, ErrNotFound)
	}
	return nil
}

// CreateTrackingToken creates a tracking token (ss_track_…) limited to the
// given domains (empty allows every origin) and returns its id and the token
// in plain text (shown once).
func (s *Store) CreateTrackingToken(ctx context.Context, workspaceID string, domains []string) (id, token string, err error) {
	clean := make([]string, 0, len(domains))
	for _, d := range domains {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "" {
			continue
		}
		if strings.ContainsAny(d, "/: ") {
			return "", "", fmt.Errorf("create tracking token: %q is not a domain name (no scheme, port or path)", d)
		}
		clean = append(clean, d)
	}
	token, err = newToken(TrackingTokenPrefix)
	if err != nil {
		return "", "", err
	}
	id = schemas.NewID()
	h := Hash(token)
	if _, err := s.pg.Exec(ctx, sqlCreateTrackingToken, id, workspaceID, h[:], hint(token), clean); err != nil {
		return "", "", fmt.Errorf("create tracking token in workspace %s: %w", workspaceID, notFoundOnFK(err))
	}
	return id, token, nil
}

// WorkspaceExists reports whether a workspace with that id exists.
func (s *Store) WorkspaceExists(ctx context.Context, workspaceID string) (bool, error) {
	var ok bool
	if err := s.pg.QueryRow(ctx, sqlWorkspaceExists, workspaceID).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up workspace %s: %w", workspaceID, err)
	}
	return ok, nil
}

// Resolve looks a credential up by kind and hash. It returns ErrUnknown when
// no credential has that hash. Cache calls it on a miss.
func (s *Store) Resolve(ctx context.Context, kind string, hash [32]byte) (Identity, error) {
	var id Identity
	var stored []byte
	var err error
	switch kind {
	case KindAPIKey:
		var exp *time.Time
		err = s.pg.QueryRow(ctx, sqlLookupAPIKey, hash[:]).Scan(&id.KeyID, &stored, &id.Scopes, &exp,
			&id.Workspace, &id.WorkspaceName, &id.Plan, &id.ContactLimit, &id.RateMultiplier, &id.Suspended)
		if exp != nil {
			id.ExpiresAt = *exp
		}
	case KindTrackingToken:
		err = s.pg.QueryRow(ctx, sqlLookupTrackingToken, hash[:]).Scan(&id.KeyID, &stored, &id.Domains,
			&id.Workspace, &id.WorkspaceName, &id.Plan, &id.ContactLimit, &id.RateMultiplier, &id.Suspended)
	default:
		for _, k := range extraKinds {
			if k.Kind == kind {
				id, err := k.Resolve(ctx, s.pg, hash)
				if err != nil {
					return Identity{}, err
				}
				id.Kind, id.hash = kind, hash
				return id, nil
			}
		}
		return Identity{}, fmt.Errorf("resolve credential: unsupported kind %q", kind)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Identity{}, ErrUnknown
	}
	if err != nil {
		return Identity{}, fmt.Errorf("resolve %s: %w", kind, err)
	}
	// The row was found by hash; compare in constant time anyway so the match
	// never depends on an index's comparison.
	if subtle.ConstantTimeCompare(stored, hash[:]) != 1 {
		return Identity{}, ErrUnknown
	}
	id.Kind = kind
	id.hash = hash
	if id.RateMultiplier < 1 {
		id.RateMultiplier = 1
	}
	return id, nil
}

// notFoundOnFK maps a foreign-key violation (the workspace does not exist)
// to ErrNotFound.
func notFoundOnFK(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23503" {
		return fmt.Errorf("workspace: %w", ErrNotFound)
	}
	return err
}
