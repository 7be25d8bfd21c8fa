package oauth

import (
	"context"
	"flag"

	"sendstream/deploy/admincli"
	"sendstream/ingest/auth"
)

// AdminCommands are the operator's commands on OAuth apps (DESIGN.md):
// oauth-app create, rotate-secret and delete. features.go lists them.
func AdminCommands() []admincli.Command {
	return []admincli.Command{
		{Name: "oauth-app create", Usage: "--workspace W --name N --type confidential|public --grants authorization_code,client_credentials,refresh_token --scopes a,b [--redirect-uri U]… [--created-by MEMBER]", Run: adminCreate},
		{Name: "oauth-app rotate-secret", Usage: "--workspace W --id A", Run: adminRotate},
		{Name: "oauth-app delete", Usage: "--workspace W --id A", Run: adminDelete},
	}
}

func adminStore(ctx context.Context, env *admincli.Env, ws string) (*Store, error) {
	pg, err := auth.WorkspacePG(ctx, env, ws)
	if err != nil {
		return nil, err
	}
	return NewStore(pg), nil
}

// adminCreate → {"id","clientId","clientSecret"} (clientSecret "" for a
// public app).
func adminCreate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id (Pro or Enterprise plan)")
	name := fs.String("name", "", "app name shown on the consent page")
	typ := fs.String("type", "", "confidential (has a secret) or public (no secret, PKCE required)")
	grants := fs.String("grants", "", "comma-separated: authorization_code, client_credentials, refresh_token")
	scopes := fs.String("scopes", "", "comma-separated API-key scopes the app may ask for")
	by := fs.String("created-by", "", "member id of the creator (needs the API-keys permission); client_credentials tokens act as this member")
	var uris []string
	fs.Func("redirect-uri", "redirect URI, matched exactly: https://… or http://localhost:<port> (repeatable)", func(s string) error {
		uris = append(uris, s)
		return nil
	})
	if err := admincli.ParseFlags(fs, args, "workspace", "name", "type", "grants", "scopes"); err != nil {
		return nil, err
	}
	s, err := adminStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	app, secret, err := s.CreateApp(ctx, NewApp{Workspace: *ws, Name: *name, Type: *typ, Grants: admincli.SplitList(*grants),
		Scopes: admincli.SplitList(*scopes), RedirectURIs: uris, CreatedBy: *by})
	if err != nil {
		return nil, err
	}
	return map[string]string{"id": app.ID, "clientId": app.ClientID, "clientSecret": secret}, nil
}

// adminRotate → {"id","clientSecret"}.
func adminRotate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	id := fs.String("id", "", "app id")
	if err := admincli.ParseFlags(fs, args, "workspace", "id"); err != nil {
		return nil, err
	}
	s, err := adminStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	secret, err := s.RotateSecret(ctx, *ws, *id)
	if err != nil {
		return nil, err
	}
	return map[string]string{"id": *id, "clientSecret": secret}, nil
}

// adminDelete revokes the app's connections, then deletes it →
// {"id","deleted":true}.
func adminDelete(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	id := fs.String("id", "", "app id")
	if err := admincli.ParseFlags(fs, args, "workspace", "id"); err != nil {
		return nil, err
	}
	s, err := adminStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	if err := s.DeleteApp(ctx, *ws, *id); err != nil {
		return nil, err
	}
	return map[string]any{"id": *id, "deleted": true}, nil
}
