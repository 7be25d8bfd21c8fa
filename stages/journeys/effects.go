package journeys

import (
	"context"
	"errors"
	"fmt"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// Steps with an outside effect (hasEffect): they run before the step's
// transaction, each idempotent by the step's key.

// effect runs a step with an outside effect (hasEffect).
func (s *Stage) effect(ctx context.Context, run journeys.Run, st *schemas.JourneyStep) (stepResult, error) {
	if st.Type == schemas.StepSendEmail {
		return s.send(ctx, run, st)
	}
	return s.contact(ctx, run, st)
}

// contact runs an update_contact, add_to_list or remove_from_list step
// through the contacts store. Its changes are sets (a value, a membership
// status), so running it again after a crash changes nothing twice; the
// key (the step's) gives a retry's events the same ids.
func (s *Stage) contact(ctx context.Context, run journeys.Run, st *schemas.JourneyStep) (stepResult, error) {
	if s.o.Contacts == nil {
		return stepResult{}, pipeline.Unavailable(errors.New("no ContactWriter in this process: " + st.Type + " cannot run"))
	}
	// The key is the events' causation id: matching refuses to restart this
	// journey from a list join it causes (journeys.ErrLoop).
	key := schemas.JourneyStepKey(run.ID, run.Position)
	var events []schemas.Envelope
	var refused string
	var err error
	switch st.Type {
	case schemas.StepUpdateContact:
		var set schemas.JourneyContactSet
		if st.Set != nil {
			set = *st.Set
		}
		events, refused, err = s.o.Contacts.UpdateContact(ctx, run.Workspace, run.Email, set, key)
	default:
		events, refused, err = s.o.Contacts.SetListMembership(ctx, run.Workspace, run.ContactID, st.ListID,
			st.Type == schemas.StepAddToList, key)
	}
	if err != nil {
		return stepResult{}, fmt.Errorf("%s %s: %w", st.Type, run.Position, err)
	}
	if refused != "" {
		return stepResult{outcome: schemas.StepOutcomeSkipped, detail: refused}, nil
	}
	return stepResult{outcome: schemas.StepOutcomeDone, publish: events}, nil
}

// send runs a send_email step through the transactional path.
func (s *Stage) send(ctx context.Context, run journeys.Run, st *schemas.JourneyStep) (stepResult, error) {
	res, err := s.mail(ctx, run, st, run.Position)
	if err != nil {
		return stepResult{}, err
	}
	if res.MessageID == "" {
		return stepResult{outcome: schemas.StepOutcomeSuppressed, detail: res.RefusedCode + ": " + res.Refused}, nil
	}
	return stepResult{outcome: schemas.StepOutcomeSent, messageID: res.MessageID, publish: res.Publish}, nil
}

// mail asks the Mailer to send step st (at addr) of run.
func (s *Stage) mail(ctx context.Context, run journeys.Run, st *schemas.JourneyStep, addr string) (schemas.MailResult, error) {
	if s.o.Mailer == nil {
		return schemas.MailResult{}, pipeline.Unavailable(errors.New("no Mailer in this process: send_email cannot run"))
	}
	res, err := s.o.Mailer.SendEmail(ctx, schemas.MailRequest{Workspace: run.Workspace, To: run.Email,
		TemplateID: st.TemplateID, SendPolicy: st.SendPolicy, Subject: st.Subject, Data: run.Data,
		ExternalID: schemas.JourneySendExternalID(run.ID, addr)})
	if err != nil {
		return schemas.MailResult{}, fmt.Errorf("send_email %s: %w", addr, err)
	}
	return res, nil
}
