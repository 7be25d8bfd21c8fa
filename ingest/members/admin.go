package members

import (
	"context"
	"flag"
	"strings"

	"sendstream/deploy/admincli"
	"sendstream/ingest/auth"
)

// AdminCommands are the operator's commands on members (DESIGN.md):
// member create. features.go lists them.
func AdminCommands() []admincli.Command {
	return []admincli.Command{
		{Name: "member create", Usage: "--workspace W --email E --password P --role " + strings.Join(Roles, "|") + " [--permissions a,b]", Run: adminMemberCreate},
	}
}

// adminMemberCreate creates a member who signs in with the email and
// password → {"id"}.
func adminMemberCreate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	email := fs.String("email", "", "member email (signs in with it)")
	password := fs.String("password", "", "password (at least 8 characters; only an argon2id hash is stored); when the email already signs in to another workspace, its password")
	role := fs.String("role", "", strings.Join(Roles, ", ")+" (custom: only the named --permissions; support: read-only)")
	perms := fs.String("permissions", "", "comma-separated permissions for a member or custom role ("+strings.Join(Permissions, ", ")+")")
	if err := admincli.ParseFlags(fs, args, "workspace", "email", "password", "role"); err != nil {
		return nil, err
	}
	pg, err := auth.WorkspacePG(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	s, err := New(pg, Config{HashConcurrency: 1})
	if err != nil {
		return nil, err
	}
	id, err := s.CreateMember(ctx, NewMember{Workspace: *ws, Email: *email, Password: *password, Role: *role, Permissions: admincli.SplitList(*perms)})
	if err != nil {
		return nil, err
	}
	return map[string]string{"id": id}, nil
}
