package schemas

import (
	"fmt"
	"strconv"
)

// AppendJourneyStepDone appends d encoded exactly as json.Marshal(d)
// encodes it, without reflection (two per execution of a delay and a
// send, read by the lifecycle stage and the journey log).
func AppendJourneyStepDone(b []byte, d *JourneyStepDone) ([]byte, error) {
	if y := d.At.Year(); y < 0 || y > 9999 {
		return b, fmt.Errorf("encode journey step: at %v outside years 0-9999", d.At)
	}
	b = appendMember(b, '{', "executionId", d.ExecutionID)
	b = appendMember(b, ',', "journeyId", d.JourneyID)
	b = strconv.AppendInt(appendKey(b, ',', "version"), int64(d.Version), 10)
	b = appendMember(b, ',', "contactId", d.ContactID)
	b = appendMember(b, ',', "step", d.Step)
	b = appendMember(b, ',', "stepType", d.StepType)
	b = appendMember(b, ',', "outcome", d.Outcome)
	b = appendOptMember(b, "messageId", d.MessageID)
	b = appendOptMember(b, "detail", d.Detail)
	b = AppendJSONTime(appendKey(b, ',', "at"), d.At)
	b = appendOptMember(b, "final", d.Final)
	b = appendOptMember(b, "email", d.Email)
	return append(b, '}'), nil
}

// DecodeJourneyStepDone decodes a journey_step.done.v1 payload as
// json.Unmarshal does for the payloads AppendJourneyStepDone writes.
func DecodeJourneyStepDone(b []byte) (JourneyStepDone, error) {
	var d JourneyStepDone
	err := walkObject(b, "journey step", d.set)
	return d, err
}

// set assigns one member of a step-done payload.
func (d *JourneyStepDone) set(key string, v []byte) error {
	var dst *string
	switch key {
	case "executionId":
		dst = &d.ExecutionID
	case "journeyId":
		dst = &d.JourneyID
	case "version":
		return setInt(&d.Version, "journey step", key, v)
	case "contactId":
		dst = &d.ContactID
	case "step":
		dst = &d.Step
	case "stepType":
		dst = &d.StepType
	case "outcome":
		dst = &d.Outcome
	case "messageId":
		dst = &d.MessageID
	case "detail":
		dst = &d.Detail
	case "at":
		return setTime(&d.At, "journey step", key, v)
	case "final":
		dst = &d.Final
	case "email":
		dst = &d.Email
	default: // not a member of JourneyStepDone
		return nil
	}
	return setString(dst, "journey step", key, v)
}
