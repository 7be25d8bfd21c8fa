package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/admincli"
	"sendstream/deploy/stack"
	"sendstream/pipeline"
	chsink "sendstream/sinks/clickhouse"
	pgsink "sendstream/sinks/postgres"
)

// runAdmin runs `sendstream admin <noun> [verb] [flags]`, one of the
// commands features.go lists: it prints one JSON object on stdout, or
// returns an error (main prints it to stderr and exits non-zero).
func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return admincli.Run(ctx, featureAdminCommands(), admincli.NewEnv(openAdminPG, openAdminCH).WithPublisher(openAdminPublisher).WithTopicPrefix(adminTopicPrefix), args, stdout, stderr)
}

// openAdminPG opens Postgres from the local stack's settings
// (deploy/stack.Load: SENDSTREAM_* variables win over .run/stack.env) and
// applies the migrations.
func openAdminPG(ctx context.Context) (*pgxpool.Pool, error) {
	st, err := stack.Load()
	if st.PostgresURL == "" {
		return nil, fmt.Errorf("no Postgres: set SENDSTREAM_POSTGRES_URL or start the local stack (make run): %v", err)
	}
	pg, err := pgsink.Open(ctx, st.PostgresURL)
	if err != nil {
		return nil, err
	}
	if err := pgsink.Migrate(ctx, pg); err != nil {
		pg.Close()
		return nil, err
	}
	return pg, nil
}

// openAdminCH opens ClickHouse from the local stack's settings, like
// openAdminPG.
func openAdminCH(ctx context.Context) (driver.Conn, error) {
	st, err := stack.Load()
	if st.ClickHouseAddr == "" {
		return nil, fmt.Errorf("no ClickHouse: set SENDSTREAM_CLICKHOUSE_ADDR or start the local stack (make run): %v", err)
	}
	db := st.ClickHouseDB
	if db == "" {
		db = "sendstream"
	}
	return chsink.Open(ctx, st.ClickHouseAddr, db)
}

// adminTopicPrefix reads the configured topic prefix (config.go).
func adminTopicPrefix() (string, error) {
	cfg, err := loadConfig()
	if err != nil {
		return "", err
	}
	return cfg.TopicPrefix, nil
}

// openAdminPublisher opens a producer on the configured brokers, topic
// prefix and Kafka security (config.go); brokers the environment leaves
// unset come from the local stack's settings, like openAdminPG's. Commands
// that re-publish (admin webhook replay) ask for it.
func openAdminPublisher(ctx context.Context) (io.Closer, error) {
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	brokers := cfg.KafkaBrokers
	if len(brokers) == 0 {
		st, err := stack.Load()
		if brokers = st.Brokers(); len(brokers) == 0 {
			return nil, fmt.Errorf("no Kafka broker: set SENDSTREAM_KAFKA_BROKERS or start the local stack (make run): %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: brokers, TopicPrefix: cfg.TopicPrefix, Security: cfg.Kafka})
}
