package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/ingest/auth"
	"sendstream/schemas"
)

var (
	//go:embed sql/create_code.sql
	sqlCreateCode string
	//go:embed sql/take_code.sql
	sqlTakeCode string
	//go:embed sql/use_code.sql
	sqlUseCode string
	//go:embed sql/create_connection.sql
	sqlCreateConnection string
	//go:embed sql/revoke_connection.sql
	sqlRevokeConnection string
	//go:embed sql/create_token.sql
	sqlCreateToken string
	//go:embed sql/find_token.sql
	sqlFindToken string
	//go:embed sql/replace_token.sql
	sqlReplaceToken string
	//go:embed sql/expire_token.sql
	sqlExpireToken string
	//go:embed sql/lookup_access.sql
	sqlLookupAccess string
)

func init() {
	auth.RegisterKind(auth.ExtraKind{Prefix: AccessTokenPrefix, Kind: auth.KindOAuth, Resolve: resolve})
}

// Tokens is a successful token response (RFC 6749 5.1).
type Tokens struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	Scope        string `json:"scope"`
	RefreshToken string `json:"refresh_token,omitempty"`
}

// CodeRequest is an approved authorization request (the consent page calls
// IssueCode with it once a member approved).
type CodeRequest struct {
	ClientID      string
	Workspace     string // the approving member's workspace
	MemberID      string
	Scope         string // space-separated; empty asks for all of the app's
	RedirectURI   string
	CodeChallenge string // S256 challenge; required for public apps
}

// IssueCode checks an approved authorization request and returns a
// single-use code valid for CodeTTL. Errors are *Error values: the app
// unknown or in another workspace (invalid_request), no authorization_code
// grant (unauthorized_client), redirect URI not registered exactly
// (invalid_request), scopes beyond the app's (invalid_scope), a public app
// without code_challenge (invalid_request), a member who may not approve
// (access_denied).
func (s *Store) IssueCode(ctx context.Context, r CodeRequest) (string, error) {
	app, err := s.appByClient(ctx, r.ClientID)
	if errors.Is(err, ErrNotFound) || err == nil && app.Workspace != r.Workspace {
		return "", oerr("invalid_request", "unknown client_id")
	} else if err != nil {
		return "", err
	}
	if !slices.Contains(app.RedirectURIs, r.RedirectURI) {
		return "", oerr("invalid_request", "redirect_uri is not registered for this app")
	}
	if !app.Has(GrantAuthorizationCode) {
		return "", oerr("unauthorized_client", "this app may not use the authorization_code grant")
	}
	scopes, oe := narrow(r.Scope, app.Scopes)
	if oe != nil {
		return "", oe
	}
	if r.CodeChallenge == "" && app.Type == TypePublic {
		return "", oerr("invalid_request", "a public app must send code_challenge (PKCE, S256)")
	}
	if r.CodeChallenge != "" && len(r.CodeChallenge) != 43 {
		return "", oerr("invalid_request", "code_challenge must be a base64url SHA-256 (43 characters)")
	}
	code, h, err := newToken(CodePrefix)
	if err != nil {
		return "", err
	}
	err = pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		if err := mayManage(ctx, tx, r.MemberID, r.Workspace); err != nil {
			return oerr("access_denied", "only a member with the API-keys permission may approve an app")
		}
		_, err := tx.Exec(ctx, sqlCreateCode, h[:], app.ID, app.Workspace, r.MemberID, scopes, r.RedirectURI, r.CodeChallenge, time.Now().Add(CodeTTL))
		return err
	})
	var oe2 *Error
	if errors.As(err, &oe2) {
		return "", oe2
	}
	if err != nil {
		return "", fmt.Errorf("issue code for %s: %w", app.ID, err)
	}
	return code, nil
}

// ClientCredentials issues an access token to a confidential app
// (authenticated by the caller) acting as its creator.
func (s *Store) ClientCredentials(ctx context.Context, app App, scope string) (Tokens, error) {
	if app.Type != TypeConfidential || !app.Has(GrantClientCredentials) {
		return Tokens{}, oerr("unauthorized_client", "this app may not use the client_credentials grant")
	}
	scopes, oe := narrow(scope, app.Scopes)
	if oe != nil {
		return Tokens{}, oe
	}
	var t Tokens
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		conn := schemas.NewID()
		if _, err := tx.Exec(ctx, sqlCreateConnection, conn, app.ID, app.Workspace, app.CreatedBy, GrantClientCredentials, scopes); err != nil {
			return err
		}
		var err error
		t, err = issue(ctx, tx, conn, scopes, false, false)
		return err
	})
	if err != nil {
		return Tokens{}, fmt.Errorf("client_credentials for %s: %w", app.ID, err)
	}
	return t, nil
}

// ExchangeCode redeems an authorization code (RFC 6749 4.1.3, RFC 7636
// 4.6). authenticated says the client proved its secret; a public client
// proves possession with verifier. A code presented a second time revokes
// the connection the first exchange created (RFC 6749 4.1.2).
func (s *Store) ExchangeCode(ctx context.Context, app App, authenticated bool, code, redirectURI, verifier string) (Tokens, error) {
	if !app.Has(GrantAuthorizationCode) {
		return Tokens{}, oerr("unauthorized_client", "this app may not use the authorization_code grant")
	}
	if code == "" || redirectURI == "" {
		return Tokens{}, oerr("invalid_request", "code and redirect_uri are required")
	}
	h := sha256.Sum256([]byte(code))
	var t Tokens
	var fail *Error
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		var member, uri, challenge, conn string
		var scopes []string
		var exp time.Time
		var used bool
		err := tx.QueryRow(ctx, sqlTakeCode, h[:], app.ID).Scan(&member, &scopes, &uri, &challenge, &exp, &used, &conn)
		if errors.Is(err, pgx.ErrNoRows) {
			fail = oerr("invalid_grant", "unknown authorization code")
			return nil
		}
		if err != nil {
			return err
		}
		if used {
			fail = oerr("invalid_grant", "authorization code already used; the tokens it issued are revoked")
			if conn == "" {
				return nil
			}
			return revokeConnection(ctx, tx, conn) // committed: fail is returned after
		}
		switch {
		case !time.Now().Before(exp):
			fail = oerr("invalid_grant", "authorization code expired")
		case uri != redirectURI:
			fail = oerr("invalid_grant", "redirect_uri differs from the authorization request's")
		case challenge == "" && verifier != "":
			fail = oerr("invalid_grant", "code_verifier sent but the authorization request had no code_challenge")
		case challenge != "" && !validVerifier(verifier):
			fail = oerr("invalid_grant", "code_verifier missing or malformed (RFC 7636: 43-128 unreserved characters)")
		case challenge != "" && subtle.ConstantTimeCompare([]byte(s256(verifier)), []byte(challenge)) != 1:
			fail = oerr("invalid_grant", "code_verifier does not match code_challenge")
		case !authenticated && challenge == "":
			fail = oerr("invalid_client", "client authentication or PKCE is required")
		}
		if fail != nil {
			return nil
		}
		conn = schemas.NewID()
		if _, err := tx.Exec(ctx, sqlCreateConnection, conn, app.ID, app.Workspace, member, GrantAuthorizationCode, scopes); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlUseCode, h[:], conn); err != nil {
			return err
		}
		t, err = issue(ctx, tx, conn, scopes, false, app.Has(GrantRefreshToken))
		return err
	})
	if err != nil {
		return Tokens{}, fmt.Errorf("exchange code for %s: %w", app.ID, err)
	}
	if fail != nil {
		return Tokens{}, fail
	}
	return t, nil
}

// Refresh rotates a refresh token (RFC 6749 6): the presented one is
// replaced by a new one beside a new access token. Presenting a replaced
// refresh token revokes the whole connection.
func (s *Store) Refresh(ctx context.Context, app App, refresh, scope string) (Tokens, error) {
	if !app.Has(GrantRefreshToken) {
		return Tokens{}, oerr("unauthorized_client", "this app may not use the refresh_token grant")
	}
	if refresh == "" {
		return Tokens{}, oerr("invalid_request", "refresh_token is required")
	}
	h := sha256.Sum256([]byte(refresh))
	var t Tokens
	var fail *Error
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		var tok, kind, conn, appID, member string
		var exp time.Time
		var replaced, revoked bool
		var scopes []string
		err := tx.QueryRow(ctx, sqlFindToken, h[:]).Scan(&tok, &kind, &exp, &replaced, &conn, &appID, &revoked, &member, &scopes)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && (kind != "refresh" || appID != app.ID) {
			fail = oerr("invalid_grant", "unknown refresh token")
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case revoked:
			fail = oerr("invalid_grant", "the connection of this refresh token was revoked")
		case replaced:
			fail = oerr("invalid_grant", "refresh token already used; the connection is revoked")
			return revokeConnection(ctx, tx, conn)
		case !time.Now().Before(exp):
			fail = oerr("invalid_grant", "refresh token expired")
		}
		if fail != nil {
			return nil
		}
		// RFC 6749 6: the scope asked for must be within the grant's; the
		// new access token has only it, the new refresh token keeps the
		// grant's (the presented one's) scope.
		narrowed, oe := narrow(scope, scopes)
		if oe != nil {
			fail = oe
			return nil
		}
		if _, err := tx.Exec(ctx, sqlReplaceToken, tok); err != nil {
			return err
		}
		t, err = issue(ctx, tx, conn, narrowed, len(narrowed) < len(scopes), true)
		return err
	})
	if err != nil {
		return Tokens{}, fmt.Errorf("refresh for %s: %w", app.ID, err)
	}
	if fail != nil {
		return Tokens{}, fail
	}
	return t, nil
}

// Revoke revokes a token of app (RFC 7009): a refresh token revokes its
// connection, an access token only itself. Unknown tokens and tokens of
// other apps change nothing and are not an error (RFC 7009 2.2).
func (s *Store) Revoke(ctx context.Context, app App, token string) error {
	h := sha256.Sum256([]byte(token))
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		var tok, kind, conn, appID, member string
		var exp time.Time
		var replaced, revoked bool
		var scopes []string
		err := tx.QueryRow(ctx, sqlFindToken, h[:]).Scan(&tok, &kind, &exp, &replaced, &conn, &appID, &revoked, &member, &scopes)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && appID != app.ID {
			return nil
		}
		if err != nil {
			return err
		}
		if kind == "refresh" {
			return revokeConnection(ctx, tx, conn)
		}
		if _, err := tx.Exec(ctx, sqlExpireToken, tok); err != nil {
			return err
		}
		return auth.Invalidate(ctx, tx, auth.CredentialChanged(conn))
	})
	if err != nil {
		return fmt.Errorf("revoke token of %s: %w", app.ID, err)
	}
	return nil
}

// revokeConnection revokes a connection and announces it to every
// process's credential cache when tx commits.
func revokeConnection(ctx context.Context, tx pgx.Tx, conn string) error {
	if _, err := tx.Exec(ctx, sqlRevokeConnection, conn); err != nil {
		return err
	}
	return auth.Invalidate(ctx, tx, auth.CredentialChanged(conn))
}

// issue stores a new access token (and refresh token) for a connection.
// scopes are the access token's; narrowed says they are fewer than the
// connection's, so the token stores its own (else it reads the
// connection's).
func issue(ctx context.Context, tx pgx.Tx, conn string, scopes []string, narrowed, withRefresh bool) (Tokens, error) {
	now := time.Now()
	at, ah, err := newToken(AccessTokenPrefix)
	if err != nil {
		return Tokens{}, err
	}
	var own []string // NULL: the connection's scopes
	if narrowed {
		own = scopes
	}
	if _, err := tx.Exec(ctx, sqlCreateToken, schemas.NewID(), ah[:], "access", conn, now.Add(AccessTokenTTL), own); err != nil {
		return Tokens{}, err
	}
	t := Tokens{AccessToken: at, TokenType: "Bearer", ExpiresIn: int(AccessTokenTTL / time.Second), Scope: joinScopes(scopes)}
	if withRefresh {
		rt, rh, err := newToken(RefreshTokenPrefix)
		if err != nil {
			return Tokens{}, err
		}
		if _, err := tx.Exec(ctx, sqlCreateToken, schemas.NewID(), rh[:], "refresh", conn, now.Add(RefreshTokenTTL), nil); err != nil {
			return Tokens{}, err
		}
		t.RefreshToken = rt
	}
	return t, nil
}

func joinScopes(s []string) string { return strings.Join(s, " ") }

// resolve is the auth.ExtraKind lookup of an access token: the connection
// id is Identity.KeyID, so revoking a connection (auth.CredentialChanged)
// evicts every token of it.
func resolve(ctx context.Context, pg *pgxpool.Pool, hash [32]byte) (auth.Identity, error) {
	var id auth.Identity
	var stored []byte
	err := pg.QueryRow(ctx, sqlLookupAccess, hash[:]).Scan(&stored, &id.ExpiresAt, &id.KeyID, &id.Scopes, &id.MemberID,
		&id.AppID, &id.AppName, &id.Workspace, &id.WorkspaceName, &id.Plan, &id.ContactLimit, &id.RateMultiplier, &id.Suspended)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.Identity{}, auth.ErrUnknown
	}
	if err != nil {
		return auth.Identity{}, fmt.Errorf("resolve oauth token: %w", err)
	}
	if subtle.ConstantTimeCompare(stored, hash[:]) != 1 || len(id.Scopes) == 0 {
		return auth.Identity{}, auth.ErrUnknown // a token always has scopes: empty would mean full access
	}
	return id, nil
}
