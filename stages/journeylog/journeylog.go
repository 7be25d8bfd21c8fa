// Package journeylog writes journey analytics to ClickHouse (issue 26 item
// 5): the table journey_events (schemas/clickhouse/0060_journey_events.sql)
// gets one row per execution started, per step an execution finished, per
// execution completed or exited and per conversion. One Stage type is
// registered three times, once per topic it reads:
//
//   - journeylog.started, the journeys topic: journey_execution.started.v1
//     (every start: trigger endpoint, event, website event, list join) is a
//     'started' row, journey_execution.cancelled.v1 (archiving, one per
//     execution it ended) a 'cancelled' row with the step it was at; the
//     engine's wake-ups are ignored;
//   - journeylog.steps, the journey steps topic: the engine's
//     journey_step.done.v1 is a 'step' row (address, type, outcome, the
//     message id of a send_email step), and when its final state is
//     completed or exited also a 'completed' or 'exited' row;
//   - journeylog.conversions, the webhooks topic: JOURNEY_CONVERTED (from
//     stages/journeymatch) is a 'converted' row with the goal's value;
//     every other webhook type is ignored.
//
// Exactly once for readers, as for events: row ids are the envelope ids
// (a completion or exit row's is the step envelope's id plus "/completed"
// or "/exited"), one row per id in the buffer, a ReplacingMergeTree table,
// and queries through LIMIT 1 BY id.
//
// Not recorded, because no envelope announces them: executions that
// failed.
package journeylog

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/breaker"
	chsink "sendstream/sinks/clickhouse"
	"sendstream/sinks/journeys"
)

// Names of the registered stages (and so of their consumer groups).
const (
	NameStarted     = "journeylog.started"     // TopicJourneys
	NameSteps       = "journeylog.steps"       // TopicJourneySteps
	NameConversions = "journeylog.conversions" // TopicWebhooks
)

// Values of journey_events.event.
const (
	EventStarted   = "started"
	EventStep      = "step"
	EventCompleted = journeys.StateCompleted // the step envelope's final state
	EventExited    = journeys.StateExited    // the step envelope's final state
	EventConverted = "converted"
	EventCancelled = journeys.StateCancelled // archiving ended it
)

//go:embed insert.sql
var insertSQL string

func init() {
	// The types each registration keeps (nil: every type of its topic);
	// the runner passes over the others undecoded.
	types := map[string][]string{
		NameStarted:     {schemas.TypeJourneyExecutionStarted, schemas.TypeJourneyExecutionCancelled},
		NameConversions: {schemas.TypeWebhookJourneyConverted},
	}
	for name, topic := range map[string]string{NameStarted: schemas.TopicJourneys, NameSteps: schemas.TopicJourneySteps,
		NameConversions: schemas.TopicWebhooks} {
		pipeline.Register(pipeline.Spec[Config]{
			Name:     name,
			Consumes: topic,
			Types:    types[name],
			// Rows are inserted about once a second; the webhooks topic
			// carries every event's EVENT_RECORDED, of which this stage
			// keeps only JOURNEY_CONVERTED, so fewer, larger fetches and
			// no validation pass of payloads it mostly skips (those it
			// keeps are parsed with encoding/json, which refuses all but
			// one valid JSON value).
			FetchMinBytes:    pipeline.BatchFetchBytes,
			UncheckedPayload: true,
			New: func(ctx context.Context, r pipeline.Resources, cfg Config) (pipeline.Stage, error) {
				return New(ctx, r, name, cfg)
			},
		})
	}
}

// Config configures the stages. The zero value is the default.
type Config struct {
	// Breaker tunes the circuit breaker around ClickHouse inserts.
	Breaker breaker.Config
}

// Stage buffers journey_events rows in Handle and inserts them in Flush.
// It handles every type the three registrations read, whichever topic it
// reads. The runner calls Handle and Flush from one goroutine; the
// buffer's mutex guards it regardless.
type Stage struct {
	name    string
	conn    driver.Conn
	breaker *breaker.Breaker
	buf     chsink.Buffer[row] // one row per row id, the first copy
}

var (
	_ pipeline.Stage   = (*Stage)(nil)
	_ pipeline.Flusher = (*Stage)(nil)
)

// New builds the stage called name (for errors and the breaker) on
// r.ClickHouse (required).
func New(ctx context.Context, r pipeline.Resources, name string, cfg Config) (*Stage, error) {
	if r.ClickHouse == nil {
		return nil, errors.New(name + ": needs ClickHouse")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: build: %w", name, err)
	}
	return &Stage{name: name, conn: r.ClickHouse, breaker: cfg.Breaker.New("clickhouse_journey_events")}, nil
}

// row is one journey_events row, in the column order of insert.sql.
type row struct {
	id, workspace, journey             string
	version                            uint32
	execution, contact, event          string
	step, stepType, outcome, messageID string
	detail, final, trigger             string
	convEvent, goalType                string
	value                              float64
	hasValue                           uint8
	currency                           string
	at                                 time.Time
}

// Handle decodes a started announcement, a cancellation, a step-done
// envelope or JOURNEY_CONVERTED and buffers its rows. Other types are ignored; a
// malformed envelope (bad payload, no id, workspace or execution, a time
// ClickHouse's DateTime cannot hold) is a pipeline.Permanent error.
func (s *Stage) Handle(_ context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	var rows []row
	var err error
	switch env.Type {
	case schemas.TypeJourneyExecutionStarted:
		rows, err = startedRows(env)
	case schemas.TypeJourneyExecutionCancelled:
		rows, err = cancelledRows(env)
	case schemas.TypeJourneyStepDone:
		rows, err = stepRows(env)
	case schemas.TypeWebhookJourneyConverted:
		rows, err = convertedRows(env)
	default:
		return nil, nil
	}
	if err == nil {
		err = check(env, rows)
	}
	if err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("%s: envelope %q: %w", s.name, env.ID, err))
	}
	for _, r := range rows {
		s.buf.Add(r.id, r)
	}
	return nil, nil
}

// check refuses rows without the ids every row needs or with a time out of
// DateTime's range.
func check(env schemas.Envelope, rows []row) error {
	if env.ID == "" || env.Workspace == "" {
		return errors.New("missing id or workspace")
	}
	for _, r := range rows {
		if r.execution == "" || r.journey == "" {
			return errors.New("missing execution or journey id")
		}
		if r.at.Unix() < 1 || r.at.Unix() >= 1<<32 {
			return fmt.Errorf("time %s out of range", r.at)
		}
	}
	return nil
}

// startedRows is the 'started' row of a journey_execution.started.v1.
func startedRows(env schemas.Envelope) ([]row, error) {
	var p schemas.JourneyExecutionStarted
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return nil, fmt.Errorf("decode payload: %w", err)
	}
	return []row{{id: env.ID, workspace: env.Workspace, journey: p.JourneyID, version: version(p.Version),
		execution: p.ExecutionID, contact: p.ContactID, event: EventStarted, trigger: p.Trigger, at: p.StartedAt.UTC()}}, nil
}

// cancelledRows is the 'cancelled' row of a
// journey_execution.cancelled.v1, with the step the execution was at.
func cancelledRows(env schemas.Envelope) ([]row, error) {
	var c schemas.JourneyExecutionCancelled
	if err := json.Unmarshal(env.Payload, &c); err != nil {
		return nil, fmt.Errorf("decode payload: %w", err)
	}
	return []row{{id: env.ID, workspace: env.Workspace, journey: c.JourneyID, version: version(c.Version),
		execution: c.ExecutionID, contact: c.ContactID, event: EventCancelled, step: c.Position, final: EventCancelled,
		at: c.At.UTC()}}, nil
}

// stepRows is the 'step' row of a journey_step.done.v1, and its
// 'completed' or 'exited' row when the step ended the execution so.
func stepRows(env schemas.Envelope) ([]row, error) {
	d, err := schemas.DecodeJourneyStepDone(env.Payload)
	if err != nil {
		return nil, fmt.Errorf("decode payload: %w", err)
	}
	if d.Step == "" {
		return nil, errors.New("missing step address")
	}
	base := row{workspace: env.Workspace, journey: d.JourneyID, version: version(d.Version), execution: d.ExecutionID,
		contact: d.ContactID, final: d.Final, at: d.At.UTC()}
	step := base
	step.id, step.event = env.ID, EventStep
	step.step, step.stepType, step.outcome, step.messageID, step.detail = d.Step, d.StepType, d.Outcome, d.MessageID, d.Detail
	rows := []row{step}
	switch d.Final {
	case EventCompleted, EventExited:
		end := base
		end.id, end.event = env.ID+"/"+d.Final, d.Final
		rows = append(rows, end)
	}
	return rows, nil
}

// convertedRows is the 'converted' row of a JOURNEY_CONVERTED.
func convertedRows(env schemas.Envelope) ([]row, error) {
	var d schemas.JourneyWebhookData
	if err := json.Unmarshal(env.Payload, &d); err != nil {
		return nil, fmt.Errorf("decode payload: %w", err)
	}
	r := row{id: env.ID, workspace: env.Workspace, journey: d.JourneyID, version: version(d.Version),
		execution: d.ExecutionID, contact: d.ContactID, event: EventConverted, convEvent: d.Event, goalType: d.GoalType,
		currency: d.Currency, at: d.OccurredAt.UTC()}
	if d.Value != "" {
		v, err := strconv.ParseFloat(string(d.Value), 64)
		if err != nil {
			return nil, fmt.Errorf("value %q: %w", d.Value, err)
		}
		r.value, r.hasValue = v, 1
	}
	return []row{r}, nil
}

// version clamps a version number to UInt32 (versions start at 1).
func version(v int) uint32 {
	if v < 0 || v > 1<<32-1 {
		return 0
	}
	return uint32(v)
}

// Flush inserts every buffered row in one batch and empties the buffer only
// when the insert succeeded.
func (s *Stage) Flush(ctx context.Context) error {
	now := time.Now().UTC()
	err := s.buf.Flush(ctx, s.conn, s.breaker, insertSQL, func(b driver.Batch, rows []row) error {
		return chsink.AppendColumns(b,
			chsink.Column(rows, func(r *row) string { return r.id }),
			chsink.Column(rows, func(r *row) string { return r.workspace }),
			chsink.Column(rows, func(r *row) string { return r.journey }),
			chsink.Column(rows, func(r *row) uint32 { return r.version }),
			chsink.Column(rows, func(r *row) string { return r.execution }),
			chsink.Column(rows, func(r *row) string { return r.contact }),
			chsink.Column(rows, func(r *row) string { return r.event }),
			chsink.Column(rows, func(r *row) string { return r.step }),
			chsink.Column(rows, func(r *row) string { return r.stepType }),
			chsink.Column(rows, func(r *row) string { return r.outcome }),
			chsink.Column(rows, func(r *row) string { return r.messageID }),
			chsink.Column(rows, func(r *row) string { return r.detail }),
			chsink.Column(rows, func(r *row) string { return r.final }),
			chsink.Column(rows, func(r *row) string { return r.trigger }),
			chsink.Column(rows, func(r *row) string { return r.convEvent }),
			chsink.Column(rows, func(r *row) string { return r.goalType }),
			chsink.Column(rows, func(r *row) float64 { return r.value }),
			chsink.Column(rows, func(r *row) uint8 { return r.hasValue }),
			chsink.Column(rows, func(r *row) string { return r.currency }),
			chsink.Column(rows, func(r *row) time.Time { return r.at }),
			chsink.Column(rows, func(*row) time.Time { return now }),
		)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return nil
}
