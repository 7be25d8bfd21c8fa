package schemas

import (
	"encoding/json"
	"strconv"
)

// Journey definitions (issue 26 item 1, DESIGN.md "A journey file"): the
// JSON file `admin journey create|update` reads, as Go types, and
// ParseJourney, the pure parser and validator that names every error. The
// README's "Journeys" section documents every field; deploy/examples holds
// examples. A stored journey version keeps the canonical JSON of its
// JourneyDefinition (json.Marshal of the parsed value), so the execution
// engine decodes exactly what was validated.

// Journey statuses (DESIGN.md).
const (
	JourneyDraft    = "draft"
	JourneyActive   = "active"
	JourneyPaused   = "paused"
	JourneyArchived = "archived"
)

// JourneyStatuses lists every journey status.
var JourneyStatuses = []string{JourneyDraft, JourneyActive, JourneyPaused, JourneyArchived}

// Trigger types: what starts an execution.
const (
	TriggerAPIEvent     = "api_event"     // POST /public/journeys/trigger with the journey's trigger key
	TriggerEvent        = "event"         // an event recorded by /v1/events or /v1/events/import that matched a contact
	TriggerWebsiteEvent = "website_event" // an event recorded by /public/events that matched a contact
	TriggerListJoined   = "list_joined"   // a membership of a list became ACTIVE (subscribe or double opt-in confirmation)
)

// TriggerTypes lists every trigger type.
var TriggerTypes = []string{TriggerAPIEvent, TriggerEvent, TriggerWebsiteEvent, TriggerListJoined}

// Re-entry settings: whether a contact may start the journey again.
const (
	ReentryAlways         = "always"         // every trigger starts an execution
	ReentryOnce           = "once"           // a contact enters at most once, ever
	ReentryOnceAtATime    = "once_at_a_time" // again only when no execution of the contact is running
	DefaultJourneyReentry = ReentryOnce
)

// ReentryModes lists every re-entry setting.
var ReentryModes = []string{ReentryAlways, ReentryOnce, ReentryOnceAtATime}

// Step types.
const (
	StepSendEmail      = "send_email"
	StepDelay          = "delay"
	StepWaitUntil      = "wait_until"
	StepWaitForEvent   = "wait_for_event"
	StepBranch         = "branch"
	StepUpdateContact  = "update_contact"
	StepAddToList      = "add_to_list"
	StepRemoveFromList = "remove_from_list"
	StepExit           = "exit"
)

// StepTypes lists every step type.
var StepTypes = []string{StepSendEmail, StepDelay, StepWaitUntil, StepWaitForEvent, StepBranch,
	StepUpdateContact, StepAddToList, StepRemoveFromList, StepExit}

// Time zones of a wait_until step.
const (
	TimeZoneContact   = "contact"   // the contact's timeZone custom field when it holds an IANA zone, else the workspace's
	TimeZoneWorkspace = "workspace" // the workspace's time zone (UTC until workspaces have one)
)

// Arms of the steps that hold nested step lists; they name the nested
// lists in step addresses ("2.then.0").
const (
	ArmThen      = "then"      // branch: the condition holds
	ArmElse      = "else"      // branch: it does not
	ArmOnEvent   = "onEvent"   // wait_for_event: the event arrived in time
	ArmOnTimeout = "onTimeout" // wait_for_event: the timeout passed first
)

// JourneyDefinition is one journey file: everything but the journey's id
// and trigger key.
type JourneyDefinition struct {
	Name    string         `json:"name"`
	Status  string         `json:"status"`
	Reentry string         `json:"reentry"`
	Trigger JourneyTrigger `json:"trigger"`
	ExitOn  *JourneyExitOn `json:"exitOn,omitempty"`
	Steps   []JourneyStep  `json:"steps"`
}

// JourneyTrigger says what starts an execution. Event is set for event and
// website_event triggers, ListID for list_joined.
type JourneyTrigger struct {
	Type   string `json:"type"`
	Event  string `json:"event,omitempty"`
	ListID string `json:"listId,omitempty"`
}

// JourneyExitOn ends a running execution as a conversion: an event of that
// name, or a goal of that type, recorded for the contact. Exactly one is set.
type JourneyExitOn struct {
	Event    string `json:"event,omitempty"`
	GoalType string `json:"goalType,omitempty"`
}

// JourneyStep is one step. Type says which fields apply:
//   - send_email: TemplateID, optional SendPolicy (a key or id) and Subject
//     (a Liquid subject that replaces the template's);
//   - delay: Duration;
//   - wait_until: Time ("HH:MM", 24 h) and TimeZone (contact or workspace);
//   - wait_for_event: Event, Timeout, OnEvent and OnTimeout (either may be
//     empty: the journey goes on after the step);
//   - branch: If, Then and Else (either may be empty);
//   - update_contact: Set;
//   - add_to_list, remove_from_list: ListID;
//   - exit: nothing.
type JourneyStep struct {
	Type       string             `json:"type"`
	TemplateID string             `json:"templateId,omitempty"`
	SendPolicy string             `json:"sendPolicy,omitempty"`
	Subject    string             `json:"subject,omitempty"`
	Duration   string             `json:"duration,omitempty"`
	Time       string             `json:"time,omitempty"`
	TimeZone   string             `json:"timeZone,omitempty"`
	Event      string             `json:"event,omitempty"`
	Timeout    string             `json:"timeout,omitempty"`
	OnEvent    []JourneyStep      `json:"onEvent,omitempty"`
	OnTimeout  []JourneyStep      `json:"onTimeout,omitempty"`
	If         *JourneyCondition  `json:"if,omitempty"`
	Then       []JourneyStep      `json:"then,omitempty"`
	Else       []JourneyStep      `json:"else,omitempty"`
	Set        *JourneyContactSet `json:"set,omitempty"`
	ListID     string             `json:"listId,omitempty"`
}

// JourneyContactSet is what an update_contact step writes. A nil field is
// left alone; a field set to JSON null is cleared. CustomFields values are
// JSON scalars (or null, which clears the value).
type JourneyContactSet struct {
	FirstName    *json.RawMessage           `json:"firstName,omitempty"`
	Country      *json.RawMessage           `json:"country,omitempty"`
	Language     *json.RawMessage           `json:"language,omitempty"`
	CustomFields map[string]json.RawMessage `json:"customFields,omitempty"`
}

// JourneyCondition is the test of a branch step. Exactly one form is used:
//   - All / Any: every / at least one of the nested conditions;
//   - Not: the nested condition does not hold;
//   - Field, CustomField or Property with Op and (except for exists) Value:
//     a contact field, a custom field, or a property of the trigger (the
//     event's properties, or the trigger call's data) by dot path;
//   - InList: the contact has an ACTIVE membership of the list;
//   - Goal with at least one of CountAtLeast, ValueAtLeast, LastWithin: the
//     contact's totals of that goal type (purchase count, lifetime value,
//     last one within a duration); all given must hold.
type JourneyCondition struct {
	All          []JourneyCondition `json:"all,omitempty"`
	Any          []JourneyCondition `json:"any,omitempty"`
	Not          *JourneyCondition  `json:"not,omitempty"`
	Field        string             `json:"field,omitempty"`
	CustomField  string             `json:"customField,omitempty"`
	Property     string             `json:"property,omitempty"`
	Op           string             `json:"op,omitempty"`
	Value        json.RawMessage    `json:"value,omitempty"`
	InList       string             `json:"inList,omitempty"`
	Goal         string             `json:"goal,omitempty"`
	CountAtLeast *int64             `json:"countAtLeast,omitempty"`
	ValueAtLeast *float64           `json:"valueAtLeast,omitempty"`
	LastWithin   string             `json:"lastWithin,omitempty"`
}

// Comparison operators of field, customField and property conditions.
// Numbers compare as numbers; strings compare as strings (so ISO 8601
// dates compare by time); contains tests a substring; exists takes no value.
const (
	OpEq       = "eq"
	OpNe       = "ne"
	OpGt       = "gt"
	OpGte      = "gte"
	OpLt       = "lt"
	OpLte      = "lte"
	OpContains = "contains"
	OpExists   = "exists"
)

// ConditionOps lists every comparison operator.
var ConditionOps = []string{OpEq, OpNe, OpGt, OpGte, OpLt, OpLte, OpContains, OpExists}

// ContactConditionFields are the contact fields a condition may test.
var ContactConditionFields = []string{"email", "firstName", "country", "language", "status", "source"}

// JourneyRefs are the workspace objects a definition names, with the path
// of each mention: the store checks that they exist.
type JourneyRefs struct {
	Templates    map[string][]string // template id → paths
	SendPolicies map[string][]string // send policy key or id → paths
	Lists        map[string][]string // list id → paths
}

// Refs collects the templates, send policies and lists d names.
func (d *JourneyDefinition) Refs() JourneyRefs {
	r := JourneyRefs{Templates: map[string][]string{}, SendPolicies: map[string][]string{}, Lists: map[string][]string{}}
	if d.Trigger.Type == TriggerListJoined && d.Trigger.ListID != "" {
		r.Lists[d.Trigger.ListID] = append(r.Lists[d.Trigger.ListID], "trigger.listId")
	}
	var cond func(c *JourneyCondition, path string)
	cond = func(c *JourneyCondition, path string) {
		if c == nil {
			return
		}
		if c.InList != "" {
			r.Lists[c.InList] = append(r.Lists[c.InList], path+".inList")
		}
		for i := range c.All {
			cond(&c.All[i], path+".all["+strconv.Itoa(i)+"]")
		}
		for i := range c.Any {
			cond(&c.Any[i], path+".any["+strconv.Itoa(i)+"]")
		}
		cond(c.Not, path+".not")
	}
	d.Walk(func(addr, path string, s *JourneyStep) {
		switch s.Type {
		case StepSendEmail:
			r.Templates[s.TemplateID] = append(r.Templates[s.TemplateID], path+".templateId")
			if s.SendPolicy != "" {
				r.SendPolicies[s.SendPolicy] = append(r.SendPolicies[s.SendPolicy], path+".sendPolicy")
			}
		case StepAddToList, StepRemoveFromList:
			r.Lists[s.ListID] = append(r.Lists[s.ListID], path+".listId")
		case StepBranch:
			cond(s.If, path+".if")
		}
	})
	return r
}

// TriggerEventName is the event name a definition's trigger listens for
// ("" unless event or website_event).
func (d *JourneyDefinition) TriggerEventName() string {
	if d.Trigger.Type == TriggerEvent || d.Trigger.Type == TriggerWebsiteEvent {
		return d.Trigger.Event
	}
	return ""
}

// arms returns the nested step lists of s with their arm names, in address
// order.
func (s *JourneyStep) arms() []struct {
	name  string
	steps []JourneyStep
} {
	type arm = struct {
		name  string
		steps []JourneyStep
	}
	switch s.Type {
	case StepBranch:
		return []arm{{ArmThen, s.Then}, {ArmElse, s.Else}}
	case StepWaitForEvent:
		return []arm{{ArmOnEvent, s.OnEvent}, {ArmOnTimeout, s.OnTimeout}}
	}
	return nil
}

// Arm returns the steps of arm name of s (nil when s has no such arm).
func (s *JourneyStep) Arm(name string) []JourneyStep {
	for _, a := range s.arms() {
		if a.name == name {
			return a.steps
		}
	}
	return nil
}

// Walk calls fn for every step, depth first in address order, with its
// address ("2.then.0") and its path in the file ("steps[2].then[0]").
func (d *JourneyDefinition) Walk(fn func(addr, path string, s *JourneyStep)) {
	var walk func(steps []JourneyStep, addr, path string)
	walk = func(steps []JourneyStep, addr, path string) {
		for i := range steps {
			a, p := addr+strconv.Itoa(i), path+"["+strconv.Itoa(i)+"]"
			fn(a, p, &steps[i])
			for _, arm := range steps[i].arms() {
				walk(arm.steps, a+"."+arm.name+".", p+"."+arm.name)
			}
		}
	}
	walk(d.Steps, "", "steps")
}
