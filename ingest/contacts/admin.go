package contacts

import (
	"context"
	"flag"

	"sendstream/deploy/admincli"
	"sendstream/ingest/auth"
)

// AdminCommands are the contacts feature's operator commands (DESIGN.md):
// list create and custom-field create, which have no public create
// endpoint. features.go lists them.
func AdminCommands() []admincli.Command {
	return []admincli.Command{
		{Name: "list create", Usage: "--workspace W --name N [--double-opt-in]", Run: adminListCreate},
		{Name: "custom-field create", Usage: "--workspace W --key K [--type string|number|boolean|date]", Run: adminCustomFieldCreate},
	}
}

// adminListCreate creates a subscription list → {"id"}.
func adminListCreate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	name := fs.String("name", "", "list name (1 to 200 characters)")
	doi := fs.Bool("double-opt-in", false, "sign-ups through the hosted form must confirm by email")
	if err := admincli.ParseFlags(fs, args, "workspace", "name"); err != nil {
		return nil, err
	}
	store, err := adminStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	l, err := store.CreateList(ctx, *ws, *name, *doi)
	if err != nil {
		return nil, err
	}
	return map[string]string{"id": l.ID}, nil
}

// adminCustomFieldCreate defines a custom field → {"key"}. Defining an
// existing key again with the same type succeeds; with another type fails.
func adminCustomFieldCreate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	key := fs.String("key", "", "field key: a letter, then up to 63 letters, digits or underscores")
	typ := fs.String("type", FieldString, "string, number, boolean or date")
	if err := admincli.ParseFlags(fs, args, "workspace", "key"); err != nil {
		return nil, err
	}
	store, err := adminStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if err := store.CreateCustomField(ctx, *ws, *key, *typ); err != nil {
		return nil, err
	}
	return map[string]string{"key": *key}, nil
}

// adminStore returns a contacts store after checking that ws exists.
func adminStore(ctx context.Context, env *admincli.Env, ws string) (*Store, error) {
	pg, err := auth.WorkspacePG(ctx, env, ws)
	if err != nil {
		return nil, err
	}
	return NewStore(pg), nil
}
