package schemas

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// JourneyError is one thing wrong with a journey file: where (a path such
// as "steps[2].duration"; "" for the file itself) and what.
type JourneyError struct {
	Path string `json:"path"`
	Msg  string `json:"message"`
}

func (e JourneyError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// JourneyErrors is every error of a refused journey file, in file order.
type JourneyErrors []JourneyError

func (es JourneyErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return "invalid journey: " + strings.Join(parts, "; ")
}

// ParseJourney decodes and validates a journey file. It returns the
// definition with defaults applied (status draft, reentry once), or
// JourneyErrors naming every problem: unknown fields, missing or
// mistyped ones, values out of their sets, durations, times, event names
// and conditions, at every depth. It checks nothing that needs the
// workspace (that templates and lists exist: see Refs). Pure; safe for
// concurrent use.
func ParseJourney(b []byte) (JourneyDefinition, error) {
	p := &journeyParser{}
	var d JourneyDefinition
	obj, ok := p.object("", b, "name", "status", "reentry", "trigger", "exitOn", "steps")
	if !ok {
		return d, p.errs
	}
	d.Name = p.str(obj, "", "name", true)
	if raw, ok := obj["name"]; ok && d.Name == "" && p.isString(raw) {
		p.add("name", "want a non-empty name")
	}
	d.Status = p.enum(obj, "", "status", JourneyStatuses, JourneyDraft)
	d.Reentry = p.enum(obj, "", "reentry", ReentryModes, DefaultJourneyReentry)
	if raw, ok := obj["trigger"]; ok {
		d.Trigger = p.trigger(raw)
	} else {
		p.add("trigger", "required: an object with type "+orList(TriggerTypes))
	}
	if raw, ok := obj["exitOn"]; ok && !isJSONNull(raw) {
		d.ExitOn = p.exitOn(raw)
	}
	if raw, ok := obj["steps"]; ok {
		d.Steps = p.steps("steps", raw)
		if d.Steps != nil && len(d.Steps) == 0 {
			p.add("steps", "want at least one step")
		}
	} else {
		p.add("steps", "required: a list of steps")
	}
	if len(p.errs) > 0 {
		return JourneyDefinition{}, p.errs
	}
	return d, nil
}

type journeyParser struct {
	errs JourneyErrors
}

func (p *journeyParser) add(path, msg string) { p.errs = append(p.errs, JourneyError{path, msg}) }

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// object decodes raw as a JSON object whose members are all in allowed.
// Unknown members are errors; ok is false only when raw is not an object.
func (p *journeyParser) object(path string, raw []byte, allowed ...string) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		if path == "" {
			p.add("", "want a JSON object (the journey file)")
		} else {
			p.add(path, "want an object")
		}
		return nil, false
	}
	var unknown []string
	for k := range obj {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		p.add(join(path, k), "unknown field; allowed here: "+strings.Join(allowed, ", "))
	}
	return obj, true
}

func isJSONNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func (p *journeyParser) isString(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil
}

// str returns member name of obj as a string ("" when absent and not
// required, with an error when required or not a string).
func (p *journeyParser) str(obj map[string]json.RawMessage, path, name string, required bool) string {
	raw, ok := obj[name]
	if !ok || isJSONNull(raw) {
		if required {
			p.add(join(path, name), "required")
		}
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.add(join(path, name), "want a string")
		return ""
	}
	return strings.TrimSpace(s)
}

// enum returns member name of obj, one of set, or def when absent.
func (p *journeyParser) enum(obj map[string]json.RawMessage, path, name string, set []string, def string) string {
	raw, ok := obj[name]
	if !ok || isJSONNull(raw) {
		return def
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || !slices.Contains(set, s) {
		p.add(join(path, name), "want "+orList(set))
		return def
	}
	return s
}

func orList(set []string) string {
	q := make([]string, len(set))
	for i, s := range set {
		q[i] = strconv.Quote(s)
	}
	if len(q) == 1 {
		return q[0]
	}
	return "one of " + strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// eventName checks member name of obj as an event name of spec 2.3.
func (p *journeyParser) eventName(obj map[string]json.RawMessage, path, name string) string {
	s := p.str(obj, path, name, true)
	if s == "" {
		if raw, ok := obj[name]; ok && p.isString(raw) {
			p.add(join(path, name), "want an event name, not an empty string")
		}
		return ""
	}
	if msg := CheckEventName(s); msg != "" {
		p.add(join(path, name), msg)
		return ""
	}
	return s
}

// CheckEventName applies the event name rules of spec 2.3 and says what is
// wrong ("" when s is a valid name).
func CheckEventName(s string) string {
	switch {
	case s == "":
		return "want an event name"
	case len(s) > 100:
		return "want an event name of at most 100 characters"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return "want an event name starting with a lowercase letter or a digit"
		}
		if !alnum && c != '.' && c != '_' && c != '/' && c != '-' {
			return "want an event name of lowercase letters, digits, '.', '_', '/' and '-'"
		}
	}
	return ""
}

func (p *journeyParser) trigger(raw []byte) JourneyTrigger {
	var t JourneyTrigger
	obj, ok := p.object("trigger", raw, "type", "event", "listId")
	if !ok {
		return t
	}
	t.Type = p.enum(obj, "trigger", "type", TriggerTypes, "")
	if _, has := obj["type"]; !has {
		p.add("trigger.type", "required: "+orList(TriggerTypes))
	}
	_, hasEvent := obj["event"]
	_, hasList := obj["listId"]
	switch t.Type {
	case TriggerEvent, TriggerWebsiteEvent:
		t.Event = p.eventName(obj, "trigger", "event")
		if hasList {
			p.add("trigger.listId", "only a list_joined trigger has a listId")
		}
	case TriggerListJoined:
		t.ListID = p.str(obj, "trigger", "listId", true)
		if hasEvent {
			p.add("trigger.event", "only event and website_event triggers have an event")
		}
	case TriggerAPIEvent:
		if hasEvent {
			p.add("trigger.event", "an api_event trigger has no event: it starts with POST /public/journeys/trigger")
		}
		if hasList {
			p.add("trigger.listId", "only a list_joined trigger has a listId")
		}
	}
	return t
}

func (p *journeyParser) exitOn(raw []byte) *JourneyExitOn {
	obj, ok := p.object("exitOn", raw, "event", "goalType")
	if !ok {
		return nil
	}
	e := &JourneyExitOn{}
	_, hasEvent := obj["event"]
	_, hasGoal := obj["goalType"]
	switch {
	case hasEvent && hasGoal:
		p.add("exitOn", "want either event or goalType, not both")
	case hasEvent:
		e.Event = p.eventName(obj, "exitOn", "event")
	case hasGoal:
		e.GoalType = p.enum(obj, "exitOn", "goalType", GoalTypes, "")
	default:
		p.add("exitOn", "want event (an event name) or goalType ("+orList(GoalTypes)+")")
	}
	return e
}

// steps parses a list of steps at path; nil (with an error) when raw is
// not a list.
func (p *journeyParser) steps(path string, raw []byte) []JourneyStep {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		p.add(path, "want a list of steps")
		return nil
	}
	out := make([]JourneyStep, len(items))
	for i, it := range items {
		out[i] = p.step(path+"["+strconv.Itoa(i)+"]", it)
	}
	return out
}

// stepFields are the fields each step type allows besides type.
var stepFields = map[string][]string{
	StepSendEmail:      {"templateId", "sendPolicy", "subject"},
	StepDelay:          {"duration"},
	StepWaitUntil:      {"time", "timeZone"},
	StepWaitForEvent:   {"event", "timeout", ArmOnEvent, ArmOnTimeout},
	StepBranch:         {"if", ArmThen, ArmElse},
	StepUpdateContact:  {"set"},
	StepAddToList:      {"listId"},
	StepRemoveFromList: {"listId"},
	StepExit:           {},
}

var sendPolicyRef = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$|^[0-9a-f]{32}$`)

func (p *journeyParser) step(path string, raw []byte) JourneyStep {
	var s JourneyStep
	var head map[string]json.RawMessage
	if err := json.Unmarshal(raw, &head); err != nil || head == nil {
		p.add(path, "want a step object with a type")
		return s
	}
	s.Type = p.enum(head, path, "type", StepTypes, "")
	if _, has := head["type"]; !has {
		p.add(path+".type", "required: "+orList(StepTypes))
	}
	if s.Type == "" {
		return s
	}
	obj, _ := p.object(path, raw, append([]string{"type"}, stepFields[s.Type]...)...)
	switch s.Type {
	case StepSendEmail:
		s.TemplateID = p.str(obj, path, "templateId", true)
		if raw, ok := obj["templateId"]; ok && s.TemplateID == "" && p.isString(raw) {
			p.add(path+".templateId", "want a template id, not an empty string")
		}
		s.SendPolicy = p.str(obj, path, "sendPolicy", false)
		if s.SendPolicy != "" && !sendPolicyRef.MatchString(s.SendPolicy) {
			p.add(path+".sendPolicy", "want a send policy key (lowercase letters, digits, '_', '.', '-') or id")
		}
		if raw, ok := obj["subject"]; ok && !isJSONNull(raw) {
			var subj string
			if json.Unmarshal(raw, &subj) != nil {
				p.add(path+".subject", "want a string (Liquid; it replaces the template's subject)")
			} else if strings.TrimSpace(subj) == "" {
				p.add(path+".subject", "want a non-empty subject, or leave subject out to use the template's")
			} else {
				s.Subject = subj
			}
		}
	case StepDelay:
		s.Duration = p.duration(obj, path, "duration")
	case StepWaitUntil:
		s.Time = p.str(obj, path, "time", true)
		if s.Time != "" {
			if _, err := time.Parse("15:04", s.Time); err != nil || len(s.Time) != 5 {
				p.add(path+".time", `want a time of day as "HH:MM" (24-hour clock), e.g. "09:00"`)
				s.Time = ""
			}
		}
		s.TimeZone = p.enum(obj, path, "timeZone", []string{TimeZoneContact, TimeZoneWorkspace}, TimeZoneWorkspace)
	case StepWaitForEvent:
		s.Event = p.eventName(obj, path, "event")
		s.Timeout = p.duration(obj, path, "timeout")
		s.OnEvent = p.arm(obj, path, ArmOnEvent)
		s.OnTimeout = p.arm(obj, path, ArmOnTimeout)
	case StepBranch:
		if raw, ok := obj["if"]; ok && !isJSONNull(raw) {
			s.If = p.condition(path+".if", raw)
		} else {
			p.add(path+".if", "required: the condition that picks then or else")
		}
		s.Then = p.arm(obj, path, ArmThen)
		s.Else = p.arm(obj, path, ArmElse)
	case StepUpdateContact:
		s.Set = p.contactSet(obj, path)
	case StepAddToList, StepRemoveFromList:
		s.ListID = p.str(obj, path, "listId", true)
		if raw, ok := obj["listId"]; ok && s.ListID == "" && p.isString(raw) {
			p.add(path+".listId", "want a list id, not an empty string")
		}
	}
	return s
}

// arm parses an optional nested step list (an empty one continues after
// the step).
func (p *journeyParser) arm(obj map[string]json.RawMessage, path, name string) []JourneyStep {
	raw, ok := obj[name]
	if !ok || isJSONNull(raw) {
		return nil
	}
	return p.steps(path+"."+name, raw)
}

// ParseJourneyDuration reads a duration of a journey file: a Go duration
// ("90m", "48h", "1h30m") or whole days ("2d"). It must be positive.
func ParseJourneyDuration(s string) (time.Duration, bool) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 || strconv.Itoa(n) != d || n > 36500 {
			return 0, false
		}
		return time.Duration(n) * 24 * time.Hour, true
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, false
	}
	return v, true
}

func (p *journeyParser) duration(obj map[string]json.RawMessage, path, name string) string {
	raw, ok := obj[name]
	if !ok || isJSONNull(raw) {
		p.add(join(path, name), `required: a positive duration such as "30m", "48h" or "2d"`)
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		p.add(join(path, name), `want a duration string such as "30m", "48h" or "2d"`)
		return ""
	}
	if _, ok := ParseJourneyDuration(s); !ok {
		p.add(join(path, name), `want a positive duration such as "30m", "48h" or "2d", not `+strconv.Quote(s))
		return ""
	}
	return s
}

var customFieldKey = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

func (p *journeyParser) contactSet(obj map[string]json.RawMessage, path string) *JourneyContactSet {
	raw, ok := obj["set"]
	if !ok || isJSONNull(raw) {
		p.add(path+".set", "required: the contact fields to write (firstName, country, language, customFields)")
		return nil
	}
	sp := path + ".set"
	m, ok := p.object(sp, raw, "firstName", "country", "language", "customFields")
	if !ok {
		return nil
	}
	set := &JourneyContactSet{}
	strOrNull := func(name string) *json.RawMessage {
		v, ok := m[name]
		if !ok {
			return nil
		}
		if !isJSONNull(v) && !p.isString(v) {
			p.add(sp+"."+name, "want a string, or null to clear it")
			return nil
		}
		c := json.RawMessage(bytes.TrimSpace(v))
		return &c
	}
	set.FirstName, set.Country, set.Language = strOrNull("firstName"), strOrNull("country"), strOrNull("language")
	if v, ok := m["customFields"]; ok {
		var cf map[string]json.RawMessage
		if json.Unmarshal(v, &cf) != nil || cf == nil {
			p.add(sp+".customFields", "want an object of custom field key to value")
		} else {
			keys := make([]string, 0, len(cf))
			for k := range cf {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			set.CustomFields = map[string]json.RawMessage{}
			for _, k := range keys {
				v := bytes.TrimSpace(cf[k])
				switch {
				case !customFieldKey.MatchString(k):
					p.add(sp+".customFields."+k, "want a custom field key: a letter, then letters, digits or '_', at most 64")
				case len(v) > 0 && (v[0] == '{' || v[0] == '['):
					p.add(sp+".customFields."+k, "want a string, number, boolean or null")
				default:
					set.CustomFields[k] = json.RawMessage(v)
				}
			}
		}
	}
	if len(m) == 0 {
		p.add(sp, "want at least one field to write")
	}
	return set
}
