package baseline

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// FROZEN: the ClickHouse baseline.

var (
	//go:embed sql/ch_setup.sql
	chSetupSQL string
	//go:embed sql/ch_drop.sql
	chDropSQL string
	//go:embed sql/ch_table.sql
	chTableSQL string
	//go:embed sql/ch_insert.sql
	chInsertSQL string
)

const chBatchRows = 10000

func init() {
	register(&Baseline{
		Name:    "ch-insert-10k",
		Doc:     "ClickHouse native insert of 10 columns in batches of 10k rows, one connection",
		Unit:    "rows",
		Needs:   []Need{NeedClickHouse},
		Workers: 1,
		Setup: func(ctx context.Context, env Env) (func(context.Context, int) (Op, error), func(), error) {
			if env.ClickHouseAddr == "" {
				return nil, nil, fmt.Errorf("no ClickHouse address (SENDSTREAM_CLICKHOUSE_ADDR)")
			}
			conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{env.ClickHouseAddr}})
			if err != nil {
				return nil, nil, fmt.Errorf("connect to ClickHouse: %w", err)
			}
			for _, q := range []string{chSetupSQL, chDropSQL, chTableSQL} {
				if err := conn.Exec(ctx, q); err != nil {
					conn.Close()
					return nil, nil, fmt.Errorf("prepare scratch table: %w", err)
				}
			}
			cleanup := func() {
				_ = conn.Exec(context.Background(), chDropSQL)
				conn.Close()
			}
			return func(context.Context, int) (Op, error) {
				var n uint64
				props := `{"plan":"pro","source":"bench","items":3}`
				return func(ctx context.Context) (int, error) {
					return chInsert(ctx, conn, &n, props)
				}, nil
			}, cleanup, nil
		},
	})
}

func chInsert(ctx context.Context, conn driver.Conn, n *uint64, props string) (int, error) {
	batch, err := conn.PrepareBatch(ctx, chInsertSQL)
	if err != nil {
		return 0, fmt.Errorf("prepare batch: %w", err)
	}
	now := time.Now().Truncate(time.Second)
	for i := 0; i < chBatchRows; i++ {
		*n++
		id := strconv.FormatUint(*n, 10)
		if err := batch.Append("ws_bench", "purchase.completed", "c"+id, "h"+id, "purchase", 49.95, "USD", now, now, props); err != nil {
			_ = batch.Abort()
			return 0, fmt.Errorf("append row: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return 0, fmt.Errorf("send batch: %w", err)
	}
	return chBatchRows, nil
}
