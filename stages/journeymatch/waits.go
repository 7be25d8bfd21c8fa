package journeymatch

import (
	"context"
	"fmt"

	"sendstream/schemas"
)

// wake returns an event wake-up (journey_execution.event.v1, for the
// engine on the journeys topic) for each execution of p's contact waiting
// for p's event at a wait_for_event step. The engine decides under the
// execution's row lock whether the event or the step's timeout ends the
// wait; this stage only finds the candidates (one indexed query, made only
// for workspaces that have journeys: Handle's cache). The wake-up's id is
// derived from the execution, its step and the event, so a redelivered
// event wakes nothing twice.
//
// Only events recorded through /v1/events and imports count: a website
// event (/public/events) is sent by browsers with the workspace's public
// key, so anyone can send one naming any contact, and it must not steer a
// contact's journey down a branch. Journeys that want website events use
// the website_event trigger.
func (s *Stage) wake(ctx context.Context, env schemas.Envelope, p *schemas.EventPayload, eventID string) ([]schemas.Envelope, error) {
	if p.Source == schemas.EventSourcePublic {
		return nil, nil
	}
	ws, err := s.store.Waiting(ctx, env.Workspace, p.ContactID, p.Event)
	if err != nil {
		return nil, fmt.Errorf("%s: envelope %s: %w", Name, env.ID, err)
	}
	if len(ws) == 0 {
		return nil, nil
	}
	received := p.ReceivedAt
	if received.IsZero() {
		received = p.OccurredAt
	}
	out := make([]schemas.Envelope, 0, len(ws))
	for _, w := range ws {
		out = append(out, schemas.JourneyEventWakeEnvelope(env.Workspace, p.ContactID, env.ID, schemas.JourneyWake{
			ExecutionID: w.ExecutionID, Position: w.Position, Event: p.Event, EventID: eventID, ReceivedAt: received.UTC()}))
	}
	return out, nil
}
