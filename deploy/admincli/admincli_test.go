package admincli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// echo is a command that prints its --name flag and, with --pg, asks env
// for Postgres.
func echo(name string) Command {
	return Command{Name: name, Usage: "--name N [--pg]", Run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) (any, error) {
		n := fs.String("name", "", "a name")
		pg := fs.Bool("pg", false, "open Postgres")
		if err := ParseFlags(fs, args, "name"); err != nil {
			return nil, err
		}
		if *pg {
			if _, err := env.PG(ctx); err != nil {
				return nil, err
			}
		}
		return map[string]string{"name": *n, "html": "<&>"}, nil
	}}
}

var errNoStack = errors.New("no stack here")

// countingEnv is an Env whose openers count their calls and fail.
func countingEnv(pgCalls, chCalls *int) *Env {
	return NewEnv(
		func(context.Context) (*pgxpool.Pool, error) { *pgCalls++; return nil, errNoStack },
		func(context.Context) (driver.Conn, error) { *chCalls++; return nil, errNoStack },
	)
}

func run(t *testing.T, cmds []Command, args ...string) (stdout, stderr string, pgCalls int, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	var chCalls int
	err = Run(context.Background(), cmds, countingEnv(&pgCalls, &chCalls), args, &out, &errOut)
	if chCalls != 0 {
		t.Errorf("ClickHouse opened %d times by commands that never ask for it", chCalls)
	}
	return out.String(), errOut.String(), pgCalls, err
}

// TestRunPrintsOneJSONObjectAndOpensNothingUnasked: the result is one line
// of JSON without HTML escaping, and a command that asks env for nothing
// opens nothing.
func TestRunPrintsOneJSONObjectAndOpensNothingUnasked(t *testing.T) {
	cmds := []Command{echo("thing create"), echo("things")}
	out, _, pgCalls, err := run(t, cmds, "thing", "create", "--name", "a")
	if err != nil || out != `{"html":"<&>","name":"a"}`+"\n" || pgCalls != 0 {
		t.Fatalf("thing create: out %q err %v pg opened %d times", out, err, pgCalls)
	}
	if out, _, _, err := run(t, cmds, "things", "--name", "b"); err != nil || !strings.Contains(out, `"name":"b"`) {
		t.Fatalf("one-word command: %q %v", out, err)
	}
	out, _, pgCalls, err = run(t, cmds, "things", "--name", "b", "--pg")
	if !errors.Is(err, errNoStack) || out != "" || pgCalls != 1 || !strings.HasPrefix(err.Error(), "admin things: ") {
		t.Fatalf("failing store: out %q err %v pg opened %d times", out, err, pgCalls)
	}
}

// TestRunErrorsAndUsage: the texts the operator sees for a missing or
// unknown command, a missing required flag, a stray argument and -h.
func TestRunErrorsAndUsage(t *testing.T) {
	cmds := []Command{echo("b verb"), echo("a")}
	const list = "usage: sendstream admin <command> [flags]; output is one JSON object\n" +
		"  a --name N [--pg]\n  b verb --name N [--pg]\n"
	for _, c := range []struct {
		args             []string
		wantErr, wantOut string
	}{
		{nil, "admin: missing command", list},
		{[]string{"b"}, `admin: unknown command "b"`, list},
		{[]string{"c", "verb", "x"}, `admin: unknown command "c verb"`, list},
		{[]string{"b", "verb"}, "admin b verb: --name is required", ""},
		{[]string{"a", "--name", "x", "extra"}, `admin a: unexpected argument "extra"`, ""},
		{[]string{"a", "-h"}, "admin a: flag: help requested", "usage: sendstream admin a --name N [--pg]\n"},
	} {
		out, stderr, _, err := run(t, cmds, c.args...)
		if err == nil || err.Error() != c.wantErr || stderr != c.wantOut || out != "" {
			t.Errorf("admin %q: err %v stderr %q stdout %q; want err %q stderr %q", c.args, err, stderr, out, c.wantErr, c.wantOut)
		}
	}
}

// TestIndexRefusesBadCommands: two features claiming one name, an empty or
// badly spaced name and a command without Run fail every command.
func TestIndexRefusesBadCommands(t *testing.T) {
	for _, cmds := range [][]Command{
		{echo("x create"), echo("x create")},
		{echo("")},
		{echo("x  create")},
		{echo("a b c")},
		{{Name: "x", Usage: ""}},
	} {
		if _, err := Index(cmds); err == nil {
			t.Errorf("Index accepted %v", cmds)
		}
		if _, _, _, err := run(t, cmds, "x", "create"); err == nil {
			t.Errorf("Run with %v succeeded", cmds)
		}
	}
}

func TestSplitList(t *testing.T) {
	if got := SplitList(" a.com, ,b.com,"); len(got) != 2 || got[0] != "a.com" || got[1] != "b.com" {
		t.Fatalf("SplitList = %q", got)
	}
	if got := SplitList(""); got != nil {
		t.Fatalf("SplitList of nothing = %q", got)
	}
}
