package clickhouse_test

import (
	"context"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/schemas"
	chsink "sendstream/sinks/clickhouse"
)

func TestSplitStatements(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"-- only a comment\n", nil},
		{"SELECT 1", []string{"SELECT 1"}},
		{"-- c\nCREATE TABLE a (x UInt8) ENGINE = Memory;\n\nCREATE TABLE b\n(\n  y String -- trailing\n)\nENGINE = Memory;\n",
			[]string{"CREATE TABLE a (x UInt8) ENGINE = Memory", "CREATE TABLE b\n(\n  y String -- trailing\n)\nENGINE = Memory"}},
		{"SELECT 'a;b'\n;\nSELECT 2", []string{"SELECT 'a;b'", "SELECT 2"}},
	} {
		if got := chsink.SplitStatements(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitStatements(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestOpenRejectsBadDatabaseName(t *testing.T) {
	if _, err := chsink.Open(context.Background(), "127.0.0.1:1", "x; DROP"); err == nil {
		t.Fatal("want an error for a database name that is not an identifier")
	}
}

// TestOpenMigrateOnRealServer opens a fresh database (created by Open),
// migrates it from several connections at once and again, and checks that
// every migration's tables exist and each name is in the ledger.
func TestOpenMigrateOnRealServer(t *testing.T) {
	env := stack.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := "test_" + strings.NewReplacer(".", "_").Replace(stack.TopicPrefix(t)) + "mig"

	conns := make([]interface{ Close() error }, 0, 3)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		conn, err := chsink.Open(ctx, env.ClickHouseAddr, db)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		conns = append(conns, conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- chsink.Migrate(ctx, conn, db)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
	for _, c := range conns {
		c.Close()
	}

	conn, err := chsink.Open(ctx, env.ClickHouseAddr, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	if err := chsink.Migrate(ctx, conn, db); err != nil {
		t.Fatalf("repeated Migrate: %v", err)
	}
	if err := chsink.Migrate(ctx, conn, "some_other_db"); err == nil {
		t.Fatal("Migrate with a database other than the connection's: want an error")
	}

	entries, err := fs.ReadDir(schemas.Migrations, "clickhouse")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM (SELECT DISTINCT name FROM schema_migrations WHERE name = ?)", e.Name()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("ledger lacks %s", e.Name())
		}
	}
	var tables uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ?", db).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables < 1 {
		t.Errorf("database %s has %d tables after Migrate", db, tables)
	}

	v, err := chsink.ServerVersion(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if v.Major == 0 || v.Raw == "" || !v.AtLeast(18, 0) || v.AtLeast(v.Major+1, 0) {
		t.Errorf("ServerVersion = %+v", v)
	}
}

// TestCHHelperMigratesSharedDatabase checks the deploy/stack helper the
// other packages use: the stack's database gets every migration.
func TestCHHelperMigratesSharedDatabase(t *testing.T) {
	conn := stack.CH(t)
	var n uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 'schema_migrations'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("schema_migrations missing in the stack's database")
	}
}

// TestAppendColumnsLargeBatch inserts a batch big enough for AppendColumns
// to reserve its string columns' buffers, and reads every value back.
func TestAppendColumnsLargeBatch(t *testing.T) {
	env := stack.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := "test_" + strings.NewReplacer(".", "_").Replace(stack.TopicPrefix(t)) + "cols"
	conn, err := chsink.Open(ctx, env.ClickHouseAddr, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	defer func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) }()
	if err := conn.Exec(ctx, "CREATE TABLE "+db+".t (n UInt32, s String, e String, l Array(String)) ENGINE = Memory"); err != nil {
		t.Fatal(err)
	}
	const rows = 3000
	ns, ss, es, ls := make([]uint32, rows), make([]string, rows), make([]string, rows), make([][]string, rows)
	for i := range ns {
		ns[i], ss[i], ls[i] = uint32(i), strings.Repeat("é", i%7)+fmt.Sprint(i), []string{fmt.Sprint(i)}
	}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".t (n, s, e, l)")
	if err != nil {
		t.Fatal(err)
	}
	if err := chsink.AppendColumns(batch, ns, ss, es, ls); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	rs, err := conn.Query(ctx, "SELECT n, s, e, l FROM "+db+".t ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	got := 0
	for rs.Next() {
		var n uint32
		var s, e string
		var l []string
		if err := rs.Scan(&n, &s, &e, &l); err != nil {
			t.Fatal(err)
		}
		if n != uint32(got) || s != ss[got] || e != "" || len(l) != 1 || l[0] != ls[got][0] {
			t.Fatalf("row %d: got %d %q %q %q", got, n, s, e, l)
		}
		got++
	}
	if got != rows {
		t.Fatalf("read %d rows, want %d", got, rows)
	}
}
