package schemas

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"
)

// Migrations holds the SQL migrations: postgres/NNNN_name.sql and
// clickhouse/NNNN_name.sql, applied in file-name order by sinks/postgres and
// sinks/clickhouse (see their Migrate functions).
//
//go:embed postgres/*.sql clickhouse/*.sql
var Migrations embed.FS

// MigrationNames lists the *.sql files of dir in fsys in file-name order
// (fs.ReadDir's order), the order migrations are applied in.
func MigrationNames(fsys fs.FS, dir string) ([]string, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("list migrations in %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".sql") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}
