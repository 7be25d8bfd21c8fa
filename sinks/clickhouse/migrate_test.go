package clickhouse_test

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"sendstream/deploy/stack"
	chsink "sendstream/sinks/clickhouse"
)

// TestMigrateRerunsAfterPartialApply simulates a process that died after
// applying a migration but before recording it: the rerun must succeed even
// though its CREATE TABLE and ADD COLUMN were already applied (18.16 has no
// ADD COLUMN IF NOT EXISTS).
func TestMigrateRerunsAfterPartialApply(t *testing.T) {
	env := stack.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := "test_" + strings.Trim(strings.ReplaceAll(stack.TopicPrefix(t), ".", "_"), "_") + "_rerun"
	conn, err := chsink.Open(ctx, env.ClickHouseAddr, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })

	fsys := fstest.MapFS{
		"m/0001_t.sql":   {Data: []byte("-- a table\nCREATE TABLE IF NOT EXISTS t\n(\n    id String\n)\nENGINE = MergeTree()\nORDER BY id;\n")},
		"m/0002_col.sql": {Data: []byte("ALTER TABLE t ADD COLUMN n UInt32;\nALTER TABLE t ADD COLUMN s String DEFAULT 'x'\n")},
	}
	if err := chsink.MigrateFS(ctx, conn, db, fsys, "m"); err != nil {
		t.Fatalf("first run: %v", err)
	}
	// Forget the ledger (as if the process died before recording).
	if err := conn.Exec(ctx, "DROP TABLE schema_migrations"); err != nil {
		t.Fatal(err)
	}
	if err := chsink.MigrateFS(ctx, conn, db, fsys, "m"); err != nil {
		t.Fatalf("rerun after partial apply: %v", err)
	}
	if err := conn.Exec(ctx, "INSERT INTO t (id, n, s) SELECT 'a', 1, 'y'"); err != nil {
		t.Fatalf("insert into migrated table: %v", err)
	}

	// A real error is not swallowed.
	bad := fstest.MapFS{"m/0003_bad.sql": {Data: []byte("ALTER TABLE t ADD COLUMN q NoSuchType\n")}}
	if err := chsink.MigrateFS(ctx, conn, db, bad, "m"); err == nil || !strings.Contains(err.Error(), "0003_bad.sql") {
		t.Fatalf("bad migration: got %v, want an error naming the file", err)
	}
}
