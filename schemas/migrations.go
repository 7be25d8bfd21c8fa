package schemas

import "embed"

// Migrations holds the SQL migrations: postgres/NNNN_name.sql and
// clickhouse/NNNN_name.sql, applied in file-name order by sinks/postgres and
// sinks/clickhouse (see their Migrate functions).
//
//go:embed postgres/*.sql clickhouse/*.sql
var Migrations embed.FS
