package oauth

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/ingest/auth"
	"sendstream/ingest/members"
	"sendstream/schemas"
)

var (
	//go:embed sql/lock_workspace.sql
	sqlLockWorkspace string
	//go:embed sql/member_of.sql
	sqlMemberOf string
	//go:embed sql/create_app.sql
	sqlCreateApp string
	//go:embed sql/rotate_secret.sql
	sqlRotateSecret string
	//go:embed sql/app_connections.sql
	sqlAppConnections string
	//go:embed sql/delete_app.sql
	sqlDeleteApp string
	//go:embed sql/app_by_client.sql
	sqlAppByClient string
	//go:embed sql/app_by_id.sql
	sqlAppByID string
	//go:embed sql/list_apps.sql
	sqlListApps string
)

// Errors of app management. Callers answer ErrNotFound with 404,
// ErrInvalid with 400, the others with 403 (ErrTooMany 409) and their text.
var (
	ErrNotFound  = errors.New("oauth app not found")
	ErrPlan      = errors.New("OAuth apps need the Pro or Enterprise plan")
	ErrTooMany   = fmt.Errorf("a workspace has at most %d OAuth apps", MaxAppsPerWorkspace)
	ErrForbidden = errors.New("managing OAuth apps needs the API-keys permission (support staff cannot change apps)")
	ErrInvalid   = errors.New("invalid OAuth app")
)

// Store keeps apps, codes, connections and tokens in Postgres. Safe for
// concurrent use.
type Store struct {
	pg *pgxpool.Pool
}

// NewStore returns a Store on pg.
func NewStore(pg *pgxpool.Pool) *Store { return &Store{pg: pg} }

// NewApp describes an app to create. CreatedBy, when set, must be a member
// of the workspace allowed to manage API keys; client_credentials tokens
// act as that member.
type NewApp struct {
	Workspace    string
	Name         string
	Type         string
	Grants       []string
	Scopes       []string
	RedirectURIs []string
	CreatedBy    string
}

func (n NewApp) validate() error {
	if strings.TrimSpace(n.Name) == "" {
		return errors.New("name is required")
	}
	if n.Type != TypeConfidential && n.Type != TypePublic {
		return fmt.Errorf("type %q: want confidential or public", n.Type)
	}
	if len(n.Grants) == 0 {
		return errors.New("at least one grant is required")
	}
	for _, g := range n.Grants {
		if !slices.Contains(Grants, g) {
			return fmt.Errorf("grant %q: want %s", g, strings.Join(Grants, ", "))
		}
	}
	if n.Type == TypePublic && slices.Contains(n.Grants, GrantClientCredentials) {
		return errors.New("client_credentials needs a confidential app (spec 5.3)")
	}
	if slices.Contains(n.Grants, GrantRefreshToken) && !slices.Contains(n.Grants, GrantAuthorizationCode) {
		return errors.New("refresh_token comes with authorization_code only")
	}
	if len(n.Scopes) == 0 {
		return errors.New("at least one scope is required")
	}
	for _, s := range n.Scopes {
		if !auth.ValidScope(s) {
			return fmt.Errorf("scope %q: want one of %s", s, strings.Join(auth.Scopes, ", "))
		}
	}
	if slices.Contains(n.Grants, GrantAuthorizationCode) && len(n.RedirectURIs) == 0 {
		return errors.New("authorization_code needs at least one redirect URI")
	}
	for _, u := range n.RedirectURIs {
		if err := ValidRedirectURI(u); err != nil {
			return err
		}
	}
	return nil
}

// CreateApp creates an app and returns it with its client secret in plain
// text (shown once; "" for a public app). It refuses a workspace not on
// Pro or Enterprise (ErrPlan), the 11th app (ErrTooMany), and a creator
// who may not manage API keys (ErrForbidden).
func (s *Store) CreateApp(ctx context.Context, n NewApp) (App, string, error) {
	if err := n.validate(); err != nil {
		return App{}, "", fmt.Errorf("create oauth app: %w: %w", ErrInvalid, err)
	}
	a := App{ID: schemas.NewID(), Workspace: n.Workspace, Name: strings.TrimSpace(n.Name), Type: n.Type,
		Grants: n.Grants, Scopes: n.Scopes, RedirectURIs: n.RedirectURIs, CreatedBy: n.CreatedBy}
	if a.RedirectURIs == nil {
		a.RedirectURIs = []string{}
	}
	clientID, _, err := newToken(ClientIDPrefix)
	if err != nil {
		return App{}, "", err
	}
	a.ClientID = clientID
	var secret string
	var hash []byte
	if n.Type == TypeConfidential {
		sec, h, err := newToken(SecretPrefix)
		if err != nil {
			return App{}, "", err
		}
		secret, hash = sec, h[:]
	}
	err = pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		var plan string
		var count int
		if err := tx.QueryRow(ctx, sqlLockWorkspace, n.Workspace).Scan(&plan, &count); errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("workspace %s: %w", n.Workspace, auth.ErrNotFound)
		} else if err != nil {
			return err
		}
		if plan != auth.PlanPro && plan != auth.PlanEnterprise {
			return ErrPlan
		}
		if count >= MaxAppsPerWorkspace {
			return ErrTooMany
		}
		if n.CreatedBy != "" {
			if err := mayManage(ctx, tx, n.CreatedBy, n.Workspace); err != nil {
				return err
			}
		}
		var by any
		if n.CreatedBy != "" {
			by = n.CreatedBy
		}
		_, err := tx.Exec(ctx, sqlCreateApp, a.ID, a.Workspace, a.Name, a.ClientID, a.Type, hash, a.Grants, a.Scopes, a.RedirectURIs, by)
		return err
	})
	if err != nil {
		return App{}, "", fmt.Errorf("create oauth app in %s: %w", n.Workspace, err)
	}
	return a, secret, nil
}

// mayManage returns ErrForbidden unless member is in workspace and
// members.Can manage API keys (support staff never can).
func mayManage(ctx context.Context, q pgx.Tx, member, workspace string) error {
	m := members.Member{ID: member, Workspace: workspace}
	err := q.QueryRow(ctx, sqlMemberOf, member, workspace).Scan(&m.Role, &m.Permissions)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("member %s is not in workspace %s: %w", member, workspace, ErrForbidden)
	}
	if err != nil {
		return fmt.Errorf("read member %s: %w", member, err)
	}
	if !members.Can(m, members.PermAPIKeys) {
		return ErrForbidden
	}
	return nil
}

// RotateSecret gives a confidential app a new secret and returns it (shown
// once). The old secret stops working with the commit: every token request
// reads the hash from Postgres.
func (s *Store) RotateSecret(ctx context.Context, workspace, id string) (string, error) {
	sec, h, err := newToken(SecretPrefix)
	if err != nil {
		return "", err
	}
	tag, err := s.pg.Exec(ctx, sqlRotateSecret, workspace, id, h[:])
	if err != nil {
		return "", fmt.Errorf("rotate secret of oauth app %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return "", fmt.Errorf("rotate secret of oauth app %s (a public app has no secret): %w", id, ErrNotFound)
	}
	return sec, nil
}

// DeleteApp revokes every connection of the app (announcing each to every
// process's credential cache) and deletes it, in one transaction.
func (s *Store) DeleteApp(ctx context.Context, workspace, id string) error {
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		if err := revokeAppConnections(ctx, tx, workspace, id); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, sqlDeleteApp, workspace, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete oauth app %s: %w", id, err)
	}
	return nil
}

// Disconnect revokes every token of the app (the connected-apps list's
// disconnect) without deleting the app.
func (s *Store) Disconnect(ctx context.Context, workspace, id string) error {
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		return revokeAppConnections(ctx, tx, workspace, id)
	})
	if err != nil {
		return fmt.Errorf("disconnect oauth app %s: %w", id, err)
	}
	return nil
}

func revokeAppConnections(ctx context.Context, tx pgx.Tx, workspace, id string) error {
	rows, err := tx.Query(ctx, sqlAppConnections, workspace, id)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	changes := make([]auth.Change, len(ids))
	for i, c := range ids {
		changes[i] = auth.CredentialChanged(c)
	}
	return auth.Invalidate(ctx, tx, changes...)
}

// App returns one app of a workspace (ErrNotFound when none).
func (s *Store) App(ctx context.Context, workspace, id string) (App, error) {
	return scanApp(s.pg.QueryRow(ctx, sqlAppByID, workspace, id))
}

// Apps lists a workspace's apps, oldest first.
func (s *Store) Apps(ctx context.Context, workspace string) ([]App, error) {
	rows, err := s.pg.Query(ctx, sqlListApps, workspace)
	if err != nil {
		return nil, fmt.Errorf("list oauth apps: %w", err)
	}
	defer rows.Close()
	var out []App
	for rows.Next() {
		a, err := scanApp(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func (s *Store) appByClient(ctx context.Context, clientID string) (App, error) {
	return scanApp(s.pg.QueryRow(ctx, sqlAppByClient, clientID))
}

func scanApp(r pgx.Row) (App, error) {
	var a App
	err := r.Scan(&a.ID, &a.Workspace, &a.Name, &a.ClientID, &a.Type, &a.secretHash, &a.Grants, &a.Scopes, &a.RedirectURIs, &a.CreatedBy, &a.suspended)
	if errors.Is(err, pgx.ErrNoRows) {
		return App{}, ErrNotFound
	}
	if err != nil {
		return App{}, fmt.Errorf("read oauth app: %w", err)
	}
	return a, nil
}
