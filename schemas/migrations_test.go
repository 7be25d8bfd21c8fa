package schemas

import (
	"reflect"
	"testing"
	"testing/fstest"
)

func TestMigrationNamesSortsSQLFilesOnly(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0010_b.sql":       {},
		"m/0002_a.sql":       {},
		"m/README.md":        {},
		"m/0003_dir.sql/x":   {}, // a directory named like a migration
		"m/0001_first.sql":   {},
		"other/0000_not.sql": {},
	}
	got, err := MigrationNames(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"0001_first.sql", "0002_a.sql", "0010_b.sql"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MigrationNames = %v, want %v", got, want)
	}
	if _, err := MigrationNames(fsys, "missing"); err == nil {
		t.Fatal("a missing directory: want an error")
	}
}

func TestEmbeddedMigrationsListed(t *testing.T) {
	for _, dir := range []string{"postgres", "clickhouse"} {
		names, err := MigrationNames(Migrations, dir)
		if err != nil || len(names) == 0 {
			t.Fatalf("%s: %v, %d names", dir, err, len(names))
		}
	}
}
