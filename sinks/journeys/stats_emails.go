package journeys

import (
	"context"
	_ "embed"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"sendstream/schemas"
)

//go:embed sql/stats_emails.sql
var sqlStatsEmails string

// StepEmails counts the emails of one send_email step of a journey
// version: Sent accepted for delivery (the step's outcome sent: the
// transactional path queued the message), Suppressed refused when the step
// ran (suppressed, unsubscribed, no policy…).
type StepEmails struct {
	Version    int    `json:"version"`
	Step       string `json:"step"` // the step's address in its version
	TemplateID string `json:"templateId"`
	Sent       int64  `json:"sent"`
	Suppressed int64  `json:"suppressed"`
}

// stepEmails returns the send_email steps of journey id, current version
// cur: every one of cur (zero when none ran yet) and those of older
// versions that ran, by version and then in address order. The counts
// come from journey_step_runs, the engine's record of each step, written
// in the transaction that moves the execution on, so they agree with the
// execution counts read beside them.
func (s *Store) stepEmails(ctx context.Context, id string, cur int) ([]StepEmails, error) {
	rows, err := s.pg.Query(ctx, sqlStatsEmails, id)
	if err != nil {
		return nil, fmt.Errorf("emails per step of journey %s: %w", id, err)
	}
	type key struct {
		version int
		addr    string
	}
	counts := map[key][2]int64{}
	versions := map[int]bool{cur: true}
	var k key
	var c [2]int64
	_, err = pgx.ForEachRow(rows, []any{&k.version, &k.addr, &c[0], &c[1]}, func() error {
		counts[k], versions[k.version] = c, true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("emails per step of journey %s: %w", id, err)
	}
	out := []StepEmails{}
	for _, v := range slices.Sorted(maps.Keys(versions)) {
		def, err := s.Version(ctx, id, v)
		if err != nil {
			return nil, fmt.Errorf("emails per step of journey %s: %w", id, err)
		}
		def.Walk(func(addr, _ string, st *schemas.JourneyStep) {
			c, ran := counts[key{v, addr}]
			if st.Type != schemas.StepSendEmail || (!ran && v != cur) {
				return
			}
			out = append(out, StepEmails{Version: v, Step: addr, TemplateID: st.TemplateID, Sent: c[0], Suppressed: c[1]})
		})
	}
	return out, nil
}
