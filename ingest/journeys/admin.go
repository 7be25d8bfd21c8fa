package journeys

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"sendstream/deploy/admincli"
	"sendstream/ingest/auth"
	"sendstream/schemas"
	"sendstream/sinks/email/render"
	"sendstream/sinks/journeys"
)

// DefaultExecutionsLimit is how many executions `admin journey executions`
// prints without --limit.
const DefaultExecutionsLimit = 100

// AdminCommands are the journeys' operator commands, exactly as DESIGN.md
// lists them. features.go lists them.
func AdminCommands() []admincli.Command {
	return []admincli.Command{
		{Name: "journey create", Usage: "--workspace W --file J.json", Run: adminCreate},
		{Name: "journey update", Usage: "--workspace W --id J --file J.json", Run: adminUpdate},
		{Name: "journey activate", Usage: "--workspace W --id J", Run: adminStatus(schemas.JourneyActive)},
		{Name: "journey pause", Usage: "--workspace W --id J", Run: adminStatus(schemas.JourneyPaused)},
		{Name: "journey archive", Usage: "--workspace W --id J", Run: adminStatus(schemas.JourneyArchived)},
		{Name: "journey executions", Usage: "--workspace W --id J [--state S] [--limit N]", Run: adminExecutions},
		{Name: "journey stats", Usage: "--workspace W --id J", Run: adminStats},
	}
}

// adminStore returns the journeys store after checking that ws exists.
func adminStore(ctx context.Context, env *admincli.Env, ws string) (*journeys.Store, error) {
	pg, err := auth.WorkspacePG(ctx, env, ws)
	if err != nil {
		return nil, err
	}
	prefix, err := env.TopicPrefix()
	if err != nil {
		return nil, err
	}
	store := journeys.NewStore(pg, nil)
	// Archive writes a cancellation per execution into the contacts outbox:
	// scoped by the deployment's prefix, its relay publishes them.
	store.SetOutboxScope(prefix)
	return store, nil
}

// idAndStore parses args with the --workspace and --id flags, both
// required, and opens the workspace's store (see adminStore): the commands
// that take nothing else.
func idAndStore(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (ws, id string, store *journeys.Store, err error) {
	wsFlag := fs.String("workspace", "", "workspace id")
	idFlag := fs.String("id", "", "journey id")
	if err := admincli.ParseFlags(fs, args, "workspace", "id"); err != nil {
		return "", "", nil, err
	}
	store, err = adminStore(ctx, env, *wsFlag)
	if err != nil {
		return "", "", nil, err
	}
	return *wsFlag, *idFlag, store, nil
}

// fileAndStore reads and validates the journey file at path (see
// readJourneyFile) and then opens ws's store (see adminStore): what create
// and update do before they write.
func fileAndStore(ctx context.Context, env *admincli.Env, ws, path string) (d schemas.JourneyDefinition, hasStatus bool, store *journeys.Store, err error) {
	d, hasStatus, err = readJourneyFile(path)
	if err != nil {
		return d, false, nil, err
	}
	store, err = adminStore(ctx, env, ws)
	if err != nil {
		return d, false, nil, err
	}
	return d, hasStatus, store, nil
}

// readJourneyFile reads and validates a journey file; hasStatus reports
// whether it names a status (update keeps the current one otherwise).
// Every problem is named, one per line.
func readJourneyFile(path string) (d schemas.JourneyDefinition, hasStatus bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return d, false, err
	}
	d, err = schemas.ParseJourney(data)
	if err != nil {
		return d, false, fileError(path, err)
	}
	if err := checkLiquid(&d); err != nil {
		return d, false, fileError(path, err)
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(data, &top) // parsed above
	_, hasStatus = top["status"]
	return d, hasStatus, nil
}

// checkLiquid parses every subject override with the engine that renders
// them, so a Liquid syntax error is refused when the journey is stored,
// not when its email is due: a schemas.JourneyErrors naming each, or nil.
func checkLiquid(d *schemas.JourneyDefinition) error {
	engine := render.NewEngine(16)
	var errs schemas.JourneyErrors
	d.Walk(func(_, path string, s *schemas.JourneyStep) {
		if s.Subject == "" {
			return
		}
		if _, err := engine.Parse(s.Subject, render.Text); err != nil {
			errs = append(errs, schemas.JourneyError{Path: path + ".subject", Msg: "Template error: " + err.Error()})
		}
	})
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// fileError lists every error of a refused definition, one per line.
func fileError(path string, err error) error {
	var errs schemas.JourneyErrors
	if !errors.As(err, &errs) {
		return err
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = "  " + e.Error()
	}
	return fmt.Errorf("%s: %d error(s):\n%s", path, len(errs), strings.Join(lines, "\n"))
}

// adminCreate → {"id","triggerKey"}: the trigger key of an api_event
// journey is shown this once (null for other triggers).
func adminCreate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	file := fs.String("file", "", "journey file (JSON; see deploy/examples/journey-welcome.json)")
	if err := admincli.ParseFlags(fs, args, "workspace", "file"); err != nil {
		return nil, err
	}
	d, _, store, err := fileAndStore(ctx, env, *ws, *file)
	if err != nil {
		return nil, err
	}
	j, key, err := store.Create(ctx, *ws, d)
	if err != nil {
		return nil, fileError(*file, err)
	}
	out := struct {
		ID         string  `json:"id"`
		TriggerKey *string `json:"triggerKey"`
	}{ID: j.ID}
	if key != "" {
		out.TriggerKey = &key
	}
	return out, nil
}

// adminUpdate → {"id","version"}: the file becomes the journey's new
// version; running executions stay on theirs. Without a status in the file
// the journey keeps its status. When the journey becomes an api_event
// journey for the first time, its new trigger key is shown once as
// "triggerKey".
func adminUpdate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	id := fs.String("id", "", "journey id")
	file := fs.String("file", "", "journey file (JSON)")
	if err := admincli.ParseFlags(fs, args, "workspace", "id", "file"); err != nil {
		return nil, err
	}
	d, hasStatus, store, err := fileAndStore(ctx, env, *ws, *file)
	if err != nil {
		return nil, err
	}
	if !hasStatus {
		cur, err := store.Get(ctx, *ws, *id)
		if err != nil {
			return nil, err
		}
		d.Status = cur.Status
	}
	j, key, err := store.Update(ctx, *ws, *id, d)
	if err != nil {
		return nil, fileError(*file, err)
	}
	out := map[string]any{"id": j.ID, "version": j.Version}
	if key != "" {
		out["triggerKey"] = key
	}
	return out, nil
}

// adminStatus is activate, pause or archive → {"id","status"}.
func adminStatus(status string) func(context.Context, *admincli.Env, *flag.FlagSet, []string) (any, error) {
	return func(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
		ws, id, store, err := idAndStore(ctx, env, fs, args)
		if err != nil {
			return nil, err
		}
		j, err := store.SetStatus(ctx, ws, id, status)
		if err != nil {
			return nil, err
		}
		return map[string]string{"id": j.ID, "status": j.Status}, nil
	}
}

// adminExecutions → {"executions":[…]}, newest first: each with its
// state, current step (address and type), version, start, next wake-up.
func adminExecutions(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	id := fs.String("id", "", "journey id")
	state := fs.String("state", "", "only executions in this state: "+strings.Join(journeys.ExecutionStates, ", "))
	limit := fs.String("limit", strconv.Itoa(DefaultExecutionsLimit), "at most this many")
	if err := admincli.ParseFlags(fs, args, "workspace", "id"); err != nil {
		return nil, err
	}
	if *state != "" && !slices.Contains(journeys.ExecutionStates, *state) {
		return nil, fmt.Errorf("--state: want one of %s", strings.Join(journeys.ExecutionStates, ", "))
	}
	n, err := strconv.Atoi(*limit)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("--limit: want a whole number of at least 1")
	}
	store, err := adminStore(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	if _, err := store.Get(ctx, *ws, *id); err != nil {
		return nil, err
	}
	rows, err := store.Executions(ctx, *ws, *id, *state, n)
	if err != nil {
		return nil, err
	}
	if rows == nil {
		rows = []journeys.ExecutionRow{}
	}
	return map[string]any{"executions": rows}, nil
}

// adminStats → {"entered","active","completed","exited","converted",
// "cancelled","failed","revenue","emailsSent","emailsPerStep"}: counts of
// the executions that exist now and the emails of each send_email step.
func adminStats(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws, id, store, err := idAndStore(ctx, env, fs, args)
	if err != nil {
		return nil, err
	}
	return store.Stats(ctx, ws, id)
}
