package requestlog

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

var (
	//go:embed expired_partitions.sql
	expiredPartitionsSQL string
	//go:embed drop_partition.sql
	dropPartitionSQL string
)

// retain runs DropExpired at start, closes firstPass, and then runs it
// every cfg.RetentionEvery until ctx is cancelled (by Close).
func (s *Stage) retain(ctx context.Context, cfg Config) {
	defer close(s.done)
	tick := time.NewTicker(cfg.RetentionEvery)
	defer tick.Stop()
	s.retentionPass(ctx, cfg)
	close(s.firstPass)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.retentionPass(ctx, cfg)
		}
	}
}

// retentionPass runs DropExpired once, bounded by cfg.RetentionTimeout.
// Failures are logged and retried next round.
func (s *Stage) retentionPass(ctx context.Context, cfg Config) {
	passCtx, cancel := context.WithTimeout(ctx, cfg.RetentionTimeout)
	defer cancel()
	dropped, err := DropExpired(passCtx, s.conn, cfg.RetentionDays)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Error("request-log retention failed", "err", err)
	case len(dropped) > 0:
		s.log.Info("request-log retention dropped partitions", "partitions", dropped)
	}
}

// DropExpired drops every active daily partition of request_log whose day
// (by the server's clock) is more than days days ago, and returns the
// partition ids it dropped. Dropping is idempotent, so concurrent callers in
// several workers are harmless. Safe to call at any time; the stage calls it
// hourly.
func DropExpired(ctx context.Context, conn driver.Conn, days int) ([]string, error) {
	if days < 1 {
		return nil, fmt.Errorf("request-log retention: %d days: must be at least 1", days)
	}
	rows, err := conn.Query(ctx, expiredPartitionsSQL, days)
	if err != nil {
		return nil, fmt.Errorf("request-log retention: list partitions: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("request-log retention: scan partition: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("request-log retention: list partitions: %w", err)
	}
	var dropped []string
	for _, id := range ids {
		if !isDay(id) {
			return dropped, fmt.Errorf("request-log retention: unexpected partition id %q", id)
		}
		if err := conn.Exec(ctx, dropPartitionSQL, id); err != nil {
			return dropped, fmt.Errorf("request-log retention: drop partition %s: %w", id, err)
		}
		dropped = append(dropped, id)
	}
	return dropped, nil
}

// isDay reports whether id looks like a toYYYYMMDD partition id.
func isDay(id string) bool {
	if len(id) != 8 {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
