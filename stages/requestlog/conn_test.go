package requestlog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/deploy/stack"
	chsink "sendstream/sinks/clickhouse"
)

// testConn returns a connection to a fresh database on the local stack's
// ClickHouse with every migration applied, dropped when the test ends. These
// tests rename, optimise and drop partitions of request_log, so they must not
// share the stack's own database with tests running in other packages.
func testConn(t *testing.T) driver.Conn {
	t.Helper()
	env := stack.ForTest(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	db := "test_requestlog_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := chsink.Open(ctx, env.ClickHouseAddr, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			t.Errorf("drop test database %s: %v", db, err)
		}
		conn.Close()
	})
	if err := chsink.Migrate(ctx, conn, db); err != nil {
		t.Fatal(err)
	}
	return conn
}
