package members

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
)

var (
	//go:embed sql/find_login.sql
	sqlFindLogin string
	//go:embed sql/create_login.sql
	sqlCreateLogin string
	//go:embed sql/create_member.sql
	sqlCreateMember string
	//go:embed sql/find_invitation.sql
	sqlFindInvitation string
	//go:embed sql/accept_invitation.sql
	sqlAcceptInvitation string
)

// Errors of Store. Routes map ErrBadCredentials to 401, ErrThrottled to
// 429, ErrForbidden to 403 and ErrInvalid to 400.
var (
	ErrBadCredentials = errors.New("email or password is incorrect")
	ErrThrottled      = errors.New("too many failed sign-ins")
	ErrForbidden      = errors.New("not allowed")
	ErrInvalid        = errors.New("invalid")
)

// Store reads and changes logins, members, sessions, sign-in failures and
// invitations in Postgres (migration 0070). Safe for concurrent use; the
// admin CLI, the sign-in routes and the ingest server (ResolveSession) call
// it.
type Store struct {
	pg     *pgxpool.Pool
	cfg    Config
	hasher *Hasher
	secure bool // the site is https: Secure cookies
	// outbox carries invitation emails (SetOutbox); nil: none are sent.
	outbox atomic.Pointer[outboxRef]
}

// New returns a Store on pg; it hashes a dummy password once (Hasher).
func New(pg *pgxpool.Pool, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.withDefaults()
	h, err := NewHasher(cfg.HashConcurrency)
	if err != nil {
		return nil, err
	}
	return &Store{pg: pg, cfg: cfg, hasher: h, secure: len(cfg.SiteURL) >= 8 && cfg.SiteURL[:8] == "https://"}, nil
}

// NewMember describes a member to create.
type NewMember struct {
	Workspace   string
	Email       string
	Password    string
	Role        string
	Permissions []string
}

// CreateMember adds a membership of a workspace for an email, creating the
// email's login with Password when it has none. When the email already
// has a login (a member of another workspace), Password must be that
// login's password. It returns the member id.
func (s *Store) CreateMember(ctx context.Context, m NewMember) (string, error) {
	email, err := schemas.NormalizeEmail(m.Email)
	if err != nil {
		return "", fmt.Errorf("create member: email %q %w", m.Email, err)
	}
	if err := CheckRole(m.Role, m.Permissions); err != nil {
		return "", fmt.Errorf("create member: %w", err)
	}
	loginID, err := s.loginFor(ctx, email, m.Password)
	if err != nil {
		return "", fmt.Errorf("create member %s: %w", email, err)
	}
	id := schemas.NewID()
	perms := m.Permissions
	if perms == nil {
		perms = []string{}
	}
	err = pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		if loginID.hash != "" {
			if _, err := tx.Exec(ctx, sqlCreateLogin, loginID.id, email, loginID.hash); err != nil {
				return fmt.Errorf("create login: %w", err)
			}
		}
		_, err := tx.Exec(ctx, sqlCreateMember, id, m.Workspace, loginID.id, email, m.Role, perms)
		return err
	})
	if err != nil {
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe) && pe.Code == "23505":
			return "", fmt.Errorf("create member: %w: %s is already a member of workspace %s", ErrInvalid, email, m.Workspace)
		case errors.As(err, &pe) && pe.Code == "23503":
			return "", fmt.Errorf("create member: workspace %s does not exist", m.Workspace)
		}
		return "", fmt.Errorf("create member in workspace %s: %w", m.Workspace, err)
	}
	return id, nil
}

// newLogin is the login a member joins: an existing one (hash empty) or a
// new one to insert with hash.
type newLogin struct{ id, hash string }

// loginFor returns the login of email after checking password against it,
// or a new login to create with password's hash.
func (s *Store) loginFor(ctx context.Context, email, password string) (newLogin, error) {
	var id, hash string
	err := s.pg.QueryRow(ctx, sqlFindLogin, email).Scan(&id, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		h, err := s.hasher.Hash(ctx, password)
		if err != nil {
			return newLogin{}, err
		}
		return newLogin{id: schemas.NewID(), hash: h}, nil
	}
	if err != nil {
		return newLogin{}, fmt.Errorf("find login: %w", err)
	}
	ok, err := s.hasher.Verify(ctx, hash, password)
	if err != nil {
		return newLogin{}, err
	}
	if !ok {
		return newLogin{}, fmt.Errorf("%w: this email already signs in to another workspace; give its password", ErrBadCredentials)
	}
	return newLogin{id: id}, nil
}

// AcceptInvitation turns an open invitation into a membership (creating
// the invitee's login with password, or checking it against the existing
// login) and returns the member id and the invitee's email. An unknown,
// used or expired token is ErrInvalid.
func (s *Store) AcceptInvitation(ctx context.Context, token, password string, now time.Time) (memberID, email string, err error) {
	h := sha256.Sum256([]byte(token))
	var id, ws, role string
	var perms []string
	err = s.pg.QueryRow(ctx, sqlFindInvitation, h[:], now).Scan(&id, &ws, &email, &role, &perms)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", fmt.Errorf("%w: the invitation is unknown, revoked, used or expired", ErrInvalid)
	}
	if err != nil {
		return "", "", fmt.Errorf("find invitation: %w", err)
	}
	memberID, err = s.CreateMember(ctx, NewMember{Workspace: ws, Email: email, Password: password, Role: role, Permissions: perms})
	if err != nil {
		return "", "", err
	}
	if _, err := s.pg.Exec(ctx, sqlAcceptInvitation, id, now); err != nil {
		return "", "", fmt.Errorf("mark invitation %s accepted: %w", id, err)
	}
	return memberID, email, nil
}

// OpenInvitation reports whether token is an invitation that can still
// be accepted at now (not revoked, used or expired).
func (s *Store) OpenInvitation(ctx context.Context, token string, now time.Time) (bool, error) {
	h := sha256.Sum256([]byte(token))
	var id, ws, email, role string
	var perms []string
	err := s.pg.QueryRow(ctx, sqlFindInvitation, h[:], now).Scan(&id, &ws, &email, &role, &perms)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find invitation: %w", err)
	}
	return true, nil
}

// newSecret returns a random token (32 bytes, base64url) and its SHA-256.
func newSecret() (string, [32]byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", [32]byte{}, fmt.Errorf("random token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	return tok, sha256.Sum256([]byte(tok)), nil
}
