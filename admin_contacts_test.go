package main

import (
	"context"
	"encoding/json"
	"testing"

	"sendstream/deploy/stack"
	"sendstream/ingest/contacts"
)

// TestAdminContacts: list create (with and without double opt-in) and
// custom-field create (types, same-type repeat, conflicting type, bad key,
// unknown workspace), checked through the contacts store.
func TestAdminContacts(t *testing.T) {
	pg := stack.PG(t)
	ctx := context.Background()
	ws := mustAdmin(t, "workspace", "create", "--name", "Contacts Admin")["workspaceId"].(string)

	a := mustAdmin(t, "list", "create", "--workspace", ws, "--name", "Weekly", "--double-opt-in")
	b := mustAdmin(t, "list", "create", "--workspace", ws, "--name", "Product news")
	store := contacts.NewStore(pg)
	defer store.Close()
	lists, err := store.Lists(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(lists) != 2 || lists[0].ID != a["id"] || !lists[0].DoubleOptIn || lists[0].Name != "Weekly" ||
		lists[1].ID != b["id"] || lists[1].DoubleOptIn {
		t.Fatalf("lists: %+v", lists)
	}

	if k := mustAdmin(t, "custom-field", "create", "--workspace", ws, "--key", "plan"); k["key"] != "plan" {
		t.Fatalf("custom-field create: %v", k)
	}
	mustAdmin(t, "custom-field", "create", "--workspace", ws, "--key", "age", "--type", "number")
	mustAdmin(t, "custom-field", "create", "--workspace", ws, "--key", "age", "--type", "number") // same again: fine
	patch, bad, err := store.CustomFieldPatch(ctx, ws, map[string]json.RawMessage{
		"plan": json.RawMessage(`"pro"`), "age": json.RawMessage(`"old"`), "other": json.RawMessage(`1`),
	})
	if err != nil || patch["plan"] != "pro" || len(bad) != 1 || bad[0] != "age" {
		t.Fatalf("defined fields: patch %v bad %v err %v", patch, bad, err)
	}
	for _, args := range [][]string{
		{"custom-field", "create", "--workspace", ws, "--key", "age", "--type", "date"},
		{"custom-field", "create", "--workspace", ws, "--key", "9lives"},
		{"custom-field", "create", "--workspace", ws, "--key", "x", "--type", "money"},
		{"custom-field", "create", "--workspace", "no-such-workspace", "--key", "x"},
		{"list", "create", "--workspace", "no-such-workspace", "--name", "x"},
		{"list", "create", "--workspace", ws},
		{"list", "create", "--workspace", ws, "--name", "   "},
	} {
		if _, err := admin(t, args...); err == nil {
			t.Errorf("admin %v succeeded", args)
		}
	}
}
