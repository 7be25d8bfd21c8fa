package contacts_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"sendstream/deploy/stack"
)

func TestZZSetLocal(t *testing.T) {
	pool := stack.PG(t)
	b := &pgx.Batch{}
	b.Queue("SET LOCAL plan_cache_mode = force_generic_plan")
	b.Queue("SHOW plan_cache_mode")
	br := pool.SendBatch(context.Background(), b)
	if _, err := br.Exec(); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := br.QueryRow().Scan(&v); err != nil {
		t.Fatal(err)
	}
	br.Close()
	var after string
	pool.QueryRow(context.Background(), "SHOW plan_cache_mode").Scan(&after)
	t.Logf("in batch %s, after %s", v, after)
}
