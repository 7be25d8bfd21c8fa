// Package clickhouse opens native-protocol ClickHouse connections and applies
// the schema migrations of schemas/clickhouse. Everything here runs on
// ClickHouse 18.16 (the local stack) and on current ClickHouse.
package clickhouse

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/schemas"
)

var (
	//go:embed sql/ledger_create.sql
	sqlLedgerCreate string
	//go:embed sql/ledger_applied.sql
	sqlLedgerApplied string
	//go:embed sql/ledger_record.sql
	sqlLedgerRecord string
	//go:embed sql/create_database.sql
	sqlCreateDatabase string
	//go:embed sql/version.sql
	sqlVersion string
	//go:embed sql/current_database.sql
	sqlCurrentDatabase string
)

// ClickHouse error codes a concurrent, repeated migration may meet.
const (
	codeDuplicateColumn       = 15
	codeIllegalColumn         = 44 // 18.16's answer to ADD COLUMN of an existing column
	codeTableAlreadyExists    = 57
	codeDatabaseAlreadyExists = 82
)

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Open connects to the ClickHouse server at addr (native protocol,
// host:port), creates database db if it is missing (through the `default`
// database) and returns a connection pool whose default database is db.
// Callers Close it. The pool is safe for concurrent use.
func Open(ctx context.Context, addr, db string) (driver.Conn, error) {
	if !identRE.MatchString(db) {
		return nil, fmt.Errorf("clickhouse: bad database name %q", db)
	}
	boot, err := connect(ctx, addr, "default")
	if err != nil {
		return nil, err
	}
	err = boot.Exec(ctx, fmt.Sprintf(strings.TrimSpace(sqlCreateDatabase), db))
	boot.Close()
	if err != nil && !isCode(err, codeDatabaseAlreadyExists) {
		return nil, fmt.Errorf("clickhouse: create database %s: %w", db, err)
	}
	return connect(ctx, addr, db)
}

func connect(ctx context.Context, addr, db string) (driver.Conn, error) {
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:             []string{addr},
		Auth:             clickhouse.Auth{Database: db, Username: "default"},
		DialTimeout:      10 * time.Second,
		ReadTimeout:      2 * time.Minute,
		MaxOpenConns:     16,
		MaxIdleConns:     8,
		ConnMaxLifetime:  time.Hour,
		Compression:      &clickhouse.Compression{Method: compressionFor(addr)},
		ConnOpenStrategy: clickhouse.ConnOpenInOrder,
	})
	if err != nil {
		return nil, fmt.Errorf("clickhouse: open %s: %w", addr, err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("clickhouse: ping %s/%s: %w", addr, db, err)
	}
	return conn, nil
}

// compressionFor picks the native protocol's block compression: none on
// loopback, where LZ4 only costs CPU on both ends (1% of an API call's CPU
// went to compressing request-log rows), LZ4 over a network.
func compressionFor(addr string) clickhouse.CompressionMethod {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return clickhouse.CompressionNone
	}
	return clickhouse.CompressionLZ4
}

// Version is a ClickHouse server version.
type Version struct {
	Major, Minor, Patch int
	Raw                 string // as the server reports it, e.g. "18.16.1"
}

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// String returns the version as the server reported it.
func (v Version) String() string { return v.Raw }

// ServerVersion asks the server for its version, so callers can gate SQL that
// only newer servers accept (18.16 lacks DateTime64, LowCardinality, TTL, Map,
// JSONExtract*).
func ServerVersion(ctx context.Context, conn driver.Conn) (Version, error) {
	var raw string
	if err := conn.QueryRow(ctx, sqlVersion).Scan(&raw); err != nil {
		return Version{}, fmt.Errorf("clickhouse: server version: %w", err)
	}
	v := Version{Raw: raw}
	parts := strings.SplitN(raw, ".", 4)
	for i, dst := range []*int{&v.Major, &v.Minor, &v.Patch} {
		if i < len(parts) {
			*dst, _ = strconv.Atoi(parts[i])
		}
	}
	return v, nil
}

// Migrate applies the migrations of schemas/clickhouse that are not yet in
// the schema_migrations table of database db, in file-name order. conn must
// come from Open(ctx, addr, db): migration files name tables without a
// database, so they land in the connection's default database. A file
// holds one or more statements, each ended by a line that ends with `;` (the
// last one may omit it); lines starting with `--` are comments. ClickHouse
// has no transactions and no locks, so migrations must be written to be
// re-runnable (CREATE ... IF NOT EXISTS; plain ALTER TABLE ... ADD COLUMN,
// since 18.16 lacks ADD COLUMN IF NOT EXISTS); "already exists" answers to
// CREATE and ADD COLUMN are accepted, so a repeated or concurrent run
// succeeds, and two processes migrating at once may both record the name.
func Migrate(ctx context.Context, conn driver.Conn, db string) error {
	return MigrateFS(ctx, conn, db, schemas.Migrations, "clickhouse")
}

// MigrateFS is Migrate for the *.sql files of dir in fsys (tests use it with
// their own files).
func MigrateFS(ctx context.Context, conn driver.Conn, db string, fsys fs.FS, dir string) error {
	names, err := schemas.MigrationNames(fsys, dir)
	if err != nil {
		return fmt.Errorf("clickhouse migrate: %w", err)
	}
	var current string
	if err := conn.QueryRow(ctx, sqlCurrentDatabase).Scan(&current); err != nil {
		return fmt.Errorf("clickhouse migrate: current database: %w", err)
	}
	if current != db {
		return fmt.Errorf("clickhouse migrate: connection uses database %q, not %q (open it with Open(ctx, addr, %q))", current, db, db)
	}
	if err := execTolerant(ctx, conn, sqlLedgerCreate); err != nil {
		return fmt.Errorf("clickhouse migrate: create ledger: %w", err)
	}
	rows, err := conn.Query(ctx, sqlLedgerApplied)
	if err != nil {
		return fmt.Errorf("clickhouse migrate: read ledger: %w", err)
	}
	done := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return fmt.Errorf("clickhouse migrate: read ledger: %w", err)
		}
		done[n] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("clickhouse migrate: read ledger: %w", err)
	}

	for _, name := range names {
		if done[name] {
			continue
		}
		body, err := fs.ReadFile(fsys, dir+"/"+name)
		if err != nil {
			return fmt.Errorf("clickhouse migrate: read %s: %w", name, err)
		}
		for i, stmt := range SplitStatements(string(body)) {
			if err := execTolerant(ctx, conn, stmt); err != nil {
				return fmt.Errorf("clickhouse migrate: %s statement %d: %w", name, i+1, err)
			}
		}
		batch, err := conn.PrepareBatch(ctx, sqlLedgerRecord)
		if err != nil {
			return fmt.Errorf("clickhouse migrate: record %s: %w", name, err)
		}
		if err := batch.Append(name, time.Now().UTC().Truncate(time.Second)); err != nil {
			return fmt.Errorf("clickhouse migrate: record %s: %w", name, err)
		}
		if err := batch.Send(); err != nil {
			return fmt.Errorf("clickhouse migrate: record %s: %w", name, err)
		}
	}
	return nil
}

// execTolerant runs one DDL statement, accepting the "already exists"
// answers that a concurrent or repeated migration produces.
func execTolerant(ctx context.Context, conn driver.Conn, stmt string) error {
	err := conn.Exec(ctx, stmt)
	if err == nil || isCode(err, codeTableAlreadyExists, codeDatabaseAlreadyExists, codeDuplicateColumn) {
		return nil
	}
	// 18.16 has no ADD COLUMN IF NOT EXISTS; re-adding a column answers 44.
	if isCode(err, codeIllegalColumn) && strings.Contains(err.Error(), "already exists") {
		return nil
	}
	return err
}

func isCode(err error, codes ...int32) bool {
	var ex *clickhouse.Exception
	if !errors.As(err, &ex) {
		return false
	}
	for _, c := range codes {
		if ex.Code == c {
			return true
		}
	}
	return false
}

// SplitStatements splits a migration file into statements: a statement ends
// at a line whose trimmed text ends with `;`; `--` comment lines and blank
// statements are dropped. Exported for tests of migration files.
func SplitStatements(body string) []string {
	var out []string
	var cur []string
	flush := func() {
		s := strings.TrimSpace(strings.Join(cur, "\n"))
		s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
		if s != "" {
			out = append(out, s)
		}
		cur = cur[:0]
	}
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "--") {
			continue
		}
		cur = append(cur, line)
		if strings.HasSuffix(t, ";") {
			flush()
		}
	}
	flush()
	return out
}
