package main

import (
	"context"
	"flag"

	"sendstream/ingest/contacts"
)

// The contacts feature's admin commands (DESIGN.md): lists and custom fields,
// which have no public create endpoint.
func init() {
	adminCommands["list create"] = adminCommand{"--workspace W --name N [--double-opt-in]", adminListCreate}
	adminCommands["custom-field create"] = adminCommand{"--workspace W --key K [--type string|number|boolean|date]", adminCustomFieldCreate}
}

// adminListCreate creates a subscription list → {"id"}.
func adminListCreate(ctx context.Context, env *adminEnv, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	name := fs.String("name", "", "list name (1 to 200 characters)")
	doi := fs.Bool("double-opt-in", false, "sign-ups through the hosted form must confirm by email")
	if err := parseFlags(fs, args, "workspace", "name"); err != nil {
		return nil, err
	}
	store, err := adminContacts(ctx, env, *ws)
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
func adminCustomFieldCreate(ctx context.Context, env *adminEnv, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	key := fs.String("key", "", "field key: a letter, then up to 63 letters, digits or underscores")
	typ := fs.String("type", contacts.FieldString, "string, number, boolean or date")
	if err := parseFlags(fs, args, "workspace", "key"); err != nil {
		return nil, err
	}
	store, err := adminContacts(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if err := store.CreateCustomField(ctx, *ws, *key, *typ); err != nil {
		return nil, err
	}
	return map[string]string{"key": *key}, nil
}

// adminContacts returns a contacts store after checking that ws exists.
func adminContacts(ctx context.Context, env *adminEnv, ws string) (*contacts.Store, error) {
	if _, err := adminWorkspaceStore(ctx, env, ws); err != nil {
		return nil, err
	}
	return contacts.NewStore(env.pg), nil
}
