package journeys

import (
	"context"
	"errors"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// What a redelivered envelope returns: the outputs of the steps its first
// handling ran, rebuilt from journey_step_runs.

// stepEnvelope is the step-done envelope of r.
func stepEnvelope(r journeys.StepRun) schemas.Envelope {
	return schemas.JourneyStepEnvelope(r.Workspace, r.CauseID, schemas.JourneyStepDone{
		ExecutionID: r.ExecutionID, JourneyID: r.JourneyID, Version: r.Version, ContactID: r.ContactID,
		Step: r.Address, StepType: r.StepType, Outcome: r.Outcome, MessageID: r.MessageID, Detail: r.Detail,
		At: r.DoneAt, Final: r.Final, Email: r.Email})
}

// replay returns the outputs of the steps env ran before on execution
// execID: their step-done envelopes and, for a message still queued, its
// send envelope again.
func (s *Stage) replay(ctx context.Context, env schemas.Envelope, execID string) ([]schemas.Envelope, error) {
	runs, err := s.o.Store.StepsCausedBy(ctx, execID, env.ID)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	var out []schemas.Envelope
	for _, r := range runs {
		if r.Outcome == schemas.StepOutcomeSent {
			pub, err := s.resend(ctx, r)
			if err != nil {
				return nil, err
			}
			out = append(out, pub...)
		}
		out = append(out, stepEnvelope(r))
	}
	return out, nil
}

// resend asks the Mailer again for the message of send step r: the same
// request, so the same message, whose envelope comes back only while it
// is still queued.
func (s *Stage) resend(ctx context.Context, r journeys.StepRun) ([]schemas.Envelope, error) {
	def, err := s.definition(ctx, r.JourneyID, r.Version)
	if err != nil {
		return nil, err
	}
	st, err := def.StepAt(r.Address)
	if err != nil {
		return nil, pipeline.Permanent(err)
	}
	run, err := s.o.Store.PeekRun(ctx, r.ExecutionID)
	if errors.Is(err, journeys.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	res, err := s.mail(ctx, run, st, r.Address)
	if err != nil {
		return nil, err
	}
	return res.Publish, nil
}
