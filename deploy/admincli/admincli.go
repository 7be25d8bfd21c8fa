// Package admincli is the registry and runner of the operator's commands,
// `sendstream admin <noun> [verb] [flags]`. Each feature declares its
// commands beside its code (ingest/auth, ingest/contacts, …) in a function
// returning []Command, and the root package's features.go lists those
// functions the way it lists the features' routes; Run looks a command up,
// parses its flags and prints its result as one JSON object.
//
// This package imports nothing of sendstream's, so feature packages under
// ingest/ and stages/ can both declare commands without import cycles. It
// lives under deploy/ with the other operator tools because the top-level
// folders are fixed.
package admincli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Command is one `sendstream admin <Name>` command.
type Command struct {
	// Name is the words that select the command: a noun and a verb
	// ("workspace create") or a noun alone ("requests").
	Name string
	// Usage is its flags as the usage text shows them, after the name
	// ("--workspace W [--limit N]").
	Usage string
	// Run declares the command's flags on fs, parses args with ParseFlags
	// and does the work; it returns the value printed as one JSON object,
	// or an error (printed to stderr, non-zero exit). env opens Postgres
	// and ClickHouse when Run first asks for them.
	Run func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) (any, error)
}

// Index checks cmds and maps each name to its command. It fails on an
// empty name, a command without Run and a name declared twice (two
// features claiming one command).
func Index(cmds []Command) (map[string]Command, error) {
	byName := make(map[string]Command, len(cmds))
	for _, c := range cmds {
		words := strings.Fields(c.Name)
		if len(words) == 0 || len(words) > 2 || strings.Join(words, " ") != c.Name {
			return nil, fmt.Errorf("admin: bad command name %q: want one or two words", c.Name)
		}
		if c.Run == nil {
			return nil, fmt.Errorf("admin: command %q has no Run", c.Name)
		}
		if _, dup := byName[c.Name]; dup {
			return nil, fmt.Errorf("admin: command %q declared twice", c.Name)
		}
		byName[c.Name] = c
	}
	return byName, nil
}

// Run runs the command args name (`sendstream admin` passes its arguments):
// it prints the command's result as one JSON object on stdout, or returns
// an error (main prints it to stderr and exits non-zero). An unknown or
// missing command prints the usage of every command to stderr. Run closes
// what env opened before it returns.
func Run(ctx context.Context, cmds []Command, env *Env, args []string, stdout, stderr io.Writer) error {
	defer env.Close()
	byName, err := Index(cmds)
	if err != nil {
		return err
	}
	name, cmd, rest, ok := lookup(byName, args)
	if !ok {
		usage(stderr, byName)
		if len(args) == 0 {
			return errors.New("admin: missing command")
		}
		return fmt.Errorf("admin: unknown command %q", strings.Join(args[:min(2, len(args))], " "))
	}
	fs := flag.NewFlagSet("admin "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, "usage: sendstream admin %s %s\n", name, cmd.Usage) }
	out, err := cmd.Run(ctx, env, fs, rest)
	if err != nil {
		return fmt.Errorf("admin %s: %w", name, err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

// lookup finds the command args start with, two words before one.
func lookup(byName map[string]Command, args []string) (string, Command, []string, bool) {
	if len(args) >= 2 {
		if c, ok := byName[args[0]+" "+args[1]]; ok {
			return c.Name, c, args[2:], true
		}
	}
	if len(args) >= 1 {
		if c, ok := byName[args[0]]; ok {
			return c.Name, c, args[1:], true
		}
	}
	return "", Command{}, nil, false
}

// usage prints every command, sorted by name, with its flags.
func usage(w io.Writer, byName map[string]Command) {
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: sendstream admin <command> [flags]; output is one JSON object")
	for _, n := range names {
		fmt.Fprintf(w, "  %s %s\n", n, byName[n].Usage)
	}
}

// ParseFlags parses args into fs and fails when a required flag is empty
// or positional arguments are left over. Commands call it once their flags
// are declared.
func ParseFlags(fs *flag.FlagSet, args []string, required ...string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, r := range required {
		if f := fs.Lookup(r); f == nil || f.Value.String() == "" {
			return fmt.Errorf("--%s is required", r)
		}
	}
	return nil
}

// SplitList splits a comma-separated flag value ("a.com, b.com"),
// dropping blanks; empty input gives nil.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
