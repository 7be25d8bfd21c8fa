package members

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/ingest"
	"sendstream/schemas"
)

var (
	//go:embed sql/first_member.sql
	sqlFirstMember string
	//go:embed sql/create_session.sql
	sqlCreateSession string
	//go:embed sql/resolve_session.sql
	sqlResolveSession string
	//go:embed sql/touch_session.sql
	sqlTouchSession string
	//go:embed sql/revoke_session.sql
	sqlRevokeSession string
	//go:embed sql/prune_sessions.sql
	sqlPruneSessions string
	//go:embed sql/failures_count.sql
	sqlFailuresCount string
	//go:embed sql/failures_add.sql
	sqlFailuresAdd string
	//go:embed sql/failures_clear.sql
	sqlFailuresClear string
)

var _ ingest.SessionResolver = (*Store)(nil)

// SignInRequest is one sign-in attempt.
type SignInRequest struct {
	Email, Password string
	IP, UserAgent   string // the client, for throttling and the session row
}

// SignIn checks an email and password and starts a session in the login's
// oldest membership, returning the token for the cookie. A wrong password
// and an unknown email both answer ErrBadCredentials after the same argon2id
// work (a dummy hash for unknown emails). When the email or the address
// has Config.AccountFailures / AddressFailures failures in the window, it
// answers ErrThrottled without looking at the password, until the window
// ends. A success forgets the email's failures.
func (s *Store) SignIn(ctx context.Context, r SignInRequest, now time.Time) (token string, err error) {
	email, normErr := schemas.NormalizeEmail(r.Email)
	if normErr != nil {
		email = strings.ToLower(strings.TrimSpace(r.Email))
	}
	keys := []string{"account:" + email, "address:" + r.IP}
	if err := s.checkThrottle(ctx, keys, now); err != nil {
		return "", err
	}
	var loginID, hash string
	if normErr == nil {
		err := s.pg.QueryRow(ctx, sqlFindLogin, email).Scan(&loginID, &hash)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return "", fmt.Errorf("sign in: find login: %w", err)
		}
	}
	ok, err := s.hasher.Verify(ctx, hash, r.Password)
	if err != nil {
		return "", fmt.Errorf("sign in: %w", err)
	}
	var memberID string
	if ok {
		err := s.pg.QueryRow(ctx, sqlFirstMember, loginID).Scan(&memberID)
		if errors.Is(err, pgx.ErrNoRows) {
			ok = false // every membership was removed: nothing to sign in to
		} else if err != nil {
			return "", fmt.Errorf("sign in: find membership: %w", err)
		}
	}
	if !ok {
		if _, err := s.pg.Exec(ctx, sqlFailuresAdd, keys, now, now.Add(-s.cfg.FailureWindow)); err != nil {
			return "", fmt.Errorf("sign in: record failure: %w", err)
		}
		return "", ErrBadCredentials
	}
	if _, err := s.pg.Exec(ctx, sqlFailuresClear, keys[0]); err != nil {
		return "", fmt.Errorf("sign in: clear failures: %w", err)
	}
	if _, err := s.pg.Exec(ctx, sqlPruneSessions, loginID, now, now.Add(-s.cfg.SessionIdle)); err != nil {
		return "", fmt.Errorf("sign in: prune sessions: %w", err)
	}
	tok, h, err := newSecret()
	if err != nil {
		return "", err
	}
	if _, err := s.pg.Exec(ctx, sqlCreateSession, schemas.NewID(), h[:], loginID, memberID, now, now.Add(s.cfg.SessionMaxAge),
		r.IP, r.UserAgent); err != nil {
		return "", fmt.Errorf("sign in: create session: %w", err)
	}
	return tok, nil
}

// checkThrottle answers ErrThrottled when any key reached its bound.
func (s *Store) checkThrottle(ctx context.Context, keys []string, now time.Time) error {
	rows, err := s.pg.Query(ctx, sqlFailuresCount, keys, now.Add(-s.cfg.FailureWindow))
	if err != nil {
		return fmt.Errorf("sign in: read failures: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			return fmt.Errorf("sign in: read failures: %w", err)
		}
		limit := s.cfg.AddressFailures
		if strings.HasPrefix(key, "account:") {
			limit = s.cfg.AccountFailures
		}
		if n >= limit {
			return ErrThrottled
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sign in: read failures: %w", err)
	}
	return nil
}

// ResolveSession implements ingest.SessionResolver: the session of token,
// if it is not revoked, past its absolute end or idle for longer than
// Config.SessionIdle. It records use (last_seen_at) at most every
// touchEvery, so an active session stays alive without a write per call.
func (s *Store) ResolveSession(ctx context.Context, token string, now time.Time) (ingest.Principal, bool, error) {
	h := sha256.Sum256([]byte(token))
	var p ingest.Principal
	var lastSeen, expires time.Time
	var revoked, suspended bool
	err := s.pg.QueryRow(ctx, sqlResolveSession, h[:]).Scan(&p.KeyID, &lastSeen, &expires, &revoked,
		&p.MemberID, &p.Role, &p.Permissions, &p.Email,
		&p.Workspace, &p.WorkspaceName, &p.Plan, &p.ContactLimit, &suspended)
	if errors.Is(err, pgx.ErrNoRows) {
		return ingest.Principal{}, false, ingest.ErrNoSession
	}
	if err != nil {
		return ingest.Principal{}, false, fmt.Errorf("resolve session: %w", err)
	}
	if revoked || !now.Before(expires) || now.Sub(lastSeen) > s.cfg.SessionIdle {
		return ingest.Principal{}, false, ingest.ErrNoSession
	}
	if now.Sub(lastSeen) >= s.touchEvery() {
		if _, err := s.pg.Exec(ctx, sqlTouchSession, p.KeyID, now); err != nil {
			return ingest.Principal{}, false, fmt.Errorf("touch session %s: %w", p.KeyID, err)
		}
	}
	p.Kind = ingest.KindSession
	return p, suspended, nil
}

// touchEvery is how stale last_seen_at may get: a minute, or a quarter of
// the idle timeout when that is shorter.
func (s *Store) touchEvery() time.Duration {
	return min(time.Minute, s.cfg.SessionIdle/4)
}

// Revoke ends the session of token (sign-out); an unknown or already
// ended session is not an error.
func (s *Store) Revoke(ctx context.Context, token string, now time.Time) error {
	h := sha256.Sum256([]byte(token))
	if _, err := s.pg.Exec(ctx, sqlRevokeSession, h[:], now); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}
