package schemas_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sendstream/schemas"
)

// designExample is DESIGN.md's journey file, with template ids filled in.
const designExample = `{"name": "Welcome", "status": "active", "reentry": "once",
 "trigger": {"type": "api_event"},
 "exitOn": {"goalType": "purchase"},
 "steps": [
   {"type": "send_email", "templateId": "tpl-welcome", "sendPolicy": "marketing"},
   {"type": "delay", "duration": "48h"},
   {"type": "branch", "if": {"goal": "purchase", "countAtLeast": 1},
    "then": [{"type": "exit"}], "else": [{"type": "send_email", "templateId": "tpl-nudge"}]}]}`

func parseOK(t *testing.T, src string) schemas.JourneyDefinition {
	t.Helper()
	d, err := schemas.ParseJourney([]byte(src))
	if err != nil {
		t.Fatalf("ParseJourney: %v", err)
	}
	return d
}

func TestParseJourneyDesignExample(t *testing.T) {
	d := parseOK(t, designExample)
	if d.Name != "Welcome" || d.Status != schemas.JourneyActive || d.Reentry != schemas.ReentryOnce ||
		d.Trigger.Type != schemas.TriggerAPIEvent || d.ExitOn == nil || d.ExitOn.GoalType != "purchase" || len(d.Steps) != 3 {
		t.Fatalf("parsed %+v", d)
	}
	b := d.Steps[2]
	if b.Type != schemas.StepBranch || b.If.Goal != "purchase" || b.If.CountAtLeast == nil || *b.If.CountAtLeast != 1 ||
		len(b.Then) != 1 || b.Then[0].Type != schemas.StepExit || b.Else[0].TemplateID != "tpl-nudge" {
		t.Fatalf("branch %+v", b)
	}
	// The canonical JSON a version stores parses back to the same value.
	canon, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if again := parseOK(t, string(canon)); !reflect.DeepEqual(again, d) {
		t.Fatalf("canonical form %s parses to %+v, want %+v", canon, again, d)
	}
}

func TestParseJourneyExamplesInDeploy(t *testing.T) {
	names, _ := filepath.Glob("../deploy/examples/journey-*.json")
	if len(names) == 0 {
		t.Fatal("no deploy/examples/journey-*.json")
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := schemas.ParseJourney(b); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// TestParseJourneyEveryStepAndTrigger: every trigger, step type and
// condition form parses, with defaults applied.
func TestParseJourneyEveryStepAndTrigger(t *testing.T) {
	for _, trig := range []string{`{"type":"api_event"}`, `{"type":"event","event":"signed_up"}`,
		`{"type":"website_event","event":"page/pricing"}`, `{"type":"list_joined","listId":"L1"}`} {
		d := parseOK(t, `{"name":"n","trigger":`+trig+`,"steps":[{"type":"exit"}]}`)
		if d.Status != schemas.JourneyDraft || d.Reentry != schemas.ReentryOnce {
			t.Errorf("%s: defaults %q %q", trig, d.Status, d.Reentry)
		}
	}
	d := parseOK(t, `{"name":"All","status":"paused","reentry":"once_at_a_time",
	 "trigger":{"type":"event","event":"order.placed"},"exitOn":{"event":"order.cancelled"},
	 "steps":[
	  {"type":"send_email","templateId":"t1","sendPolicy":"marketing","subject":"Hi {{ contact.first_name }}"},
	  {"type":"delay","duration":"2d"},
	  {"type":"wait_until","time":"09:30","timeZone":"contact"},
	  {"type":"wait_for_event","event":"order.paid","timeout":"72h",
	   "onEvent":[{"type":"add_to_list","listId":"customers"}],"onTimeout":[{"type":"remove_from_list","listId":"prospects"}]},
	  {"type":"branch","if":{"all":[
	     {"field":"country","op":"eq","value":"FR"},
	     {"customField":"plan","op":"ne","value":"free"},
	     {"property":"order.total","op":"gte","value":100},
	     {"inList":"vip"},
	     {"not":{"field":"status","op":"eq","value":"UNSUBSCRIBED"}},
	     {"any":[{"goal":"purchase","valueAtLeast":250.5},{"goal":"purchase","lastWithin":"30d","countAtLeast":2}]},
	     {"customField":"nickname","op":"exists"}]},
	   "then":[{"type":"update_contact","set":{"firstName":null,"customFields":{"tier":"gold","score":3}}}]},
	  {"type":"exit"}]}`)
	if len(d.Steps) != 6 || d.Steps[2].TimeZone != "contact" || d.Steps[3].Timeout != "72h" || len(d.Steps[4].If.All) != 7 {
		t.Fatalf("parsed %+v", d)
	}
	if wu := parseOK(t, `{"name":"n","trigger":{"type":"api_event"},"steps":[{"type":"wait_until","time":"23:59"}]}`); wu.Steps[0].TimeZone != schemas.TimeZoneWorkspace {
		t.Errorf("wait_until default time zone %q", wu.Steps[0].TimeZone)
	}
	refs := d.Refs()
	want := schemas.JourneyRefs{
		Templates:    map[string][]string{"t1": {"steps[0].templateId"}},
		SendPolicies: map[string][]string{"marketing": {"steps[0].sendPolicy"}},
		Lists: map[string][]string{"customers": {"steps[3].onEvent[0].listId"}, "prospects": {"steps[3].onTimeout[0].listId"},
			"vip": {"steps[4].if.all[3].inList"}},
	}
	if !reflect.DeepEqual(refs, want) {
		t.Errorf("Refs %+v, want %+v", refs, want)
	}
}

// TestParseJourneyNamesEveryError: one file with many mistakes gets one
// error for each, with its path, in file order.
func TestParseJourneyNamesEveryError(t *testing.T) {
	_, err := schemas.ParseJourney([]byte(`{"name":"","status":"live","reentry":"twice","colour":"red",
	 "trigger":{"type":"event","listId":"L"},"exitOn":{"event":"a","goalType":"purchase"},
	 "steps":[
	  {"type":"send_email","sendPolicy":"Bad Policy!","subject":" "},
	  {"type":"delay","duration":"0s"},
	  {"type":"delay","duration":"2 days"},
	  {"type":"wait_until","time":"9am","timeZone":"mars"},
	  {"type":"wait_for_event","event":"Bad Name","onEvent":{}},
	  {"type":"branch","then":[{"type":"teleport"}],"else":[{"type":"exit","duration":"1h"}]},
	  {"type":"branch","if":{"field":"shoeSize","op":"eq","value":42}},
	  {"type":"branch","if":{"field":"status","op":"eq","value":"GONE"}},
	  {"type":"branch","if":{"property":"a..b","op":"gt","value":{"x":1}}},
	  {"type":"branch","if":{"goal":"purchase"}},
	  {"type":"branch","if":{"goal":"purchase","countAtLeast":-1,"lastWithin":"soon"}},
	  {"type":"branch","if":{"inList":"L","field":"email","op":"eq","value":"x"}},
	  {"type":"branch","if":{"all":[]}},
	  {"type":"branch","if":{"customField":"plan","op":"exists","value":1}},
	  {"type":"branch","if":{"customField":"plan","op":"contains","value":3}},
	  {"type":"update_contact","set":{"email":"x","customFields":{"9x":1,"ok":{"a":1}}}},
	  {"type":"add_to_list"},
	  {"type":"remove_from_list","listId":""},
	  {"nope":1},
	  "step"]}`))
	var errs schemas.JourneyErrors
	if !errors.As(err, &errs) {
		t.Fatalf("err %v, want JourneyErrors", err)
	}
	want := []string{
		"colour: unknown field; allowed here: name, status, reentry, trigger, exitOn, steps",
		"name: want a non-empty name",
		`status: want one of "draft", "active", "paused" or "archived"`,
		`reentry: want one of "always", "once" or "once_at_a_time"`,
		"trigger.event: required",
		"trigger.listId: only a list_joined trigger has a listId",
		"exitOn: want either event or goalType, not both",
		"steps[0].templateId: required",
		"steps[0].sendPolicy: want a send policy key (lowercase letters, digits, '_', '.', '-') or id",
		"steps[0].subject: want a non-empty subject, or leave subject out to use the template's",
		`steps[1].duration: want a positive duration such as "30m", "48h" or "2d", not "0s"`,
		`steps[2].duration: want a positive duration such as "30m", "48h" or "2d", not "2 days"`,
		`steps[3].time: want a time of day as "HH:MM" (24-hour clock), e.g. "09:00"`,
		`steps[3].timeZone: want one of "contact" or "workspace"`,
		"steps[4].event: want an event name starting with a lowercase letter or a digit",
		`steps[4].timeout: required: a positive duration such as "30m", "48h" or "2d"`,
		"steps[4].onEvent: want a list of steps",
		"steps[5].if: required: the condition that picks then or else",
		`steps[5].then[0].type: want one of "send_email", "delay", "wait_until", "wait_for_event", "branch", "update_contact", "add_to_list", "remove_from_list" or "exit"`,
		"steps[5].else[0].duration: unknown field; allowed here: type",
		`steps[6].if.field: want one of "email", "firstName", "country", "language", "status" or "source"`,
		`steps[7].if.value: want a contact status: one of "ACTIVE", "UNSUBSCRIBED", "BOUNCED", "COMPLAINED" or "PENDING"`,
		`steps[8].if.property: want a dot path into the trigger's properties or data, e.g. "plan" or "order.total"`,
		"steps[8].if.value: want a string, number, boolean or null",
		"steps[9].if: want countAtLeast, valueAtLeast or lastWithin with goal",
		"steps[10].if.countAtLeast: want a whole number, 0 or more",
		`steps[10].if.lastWithin: want a positive duration such as "24h" or "30d", not "soon"`,
		"steps[11].if: want one condition form, not field and inList together (combine them with all or any)",
		"steps[12].if.all: want at least one condition",
		"steps[13].if.value: exists takes no value",
		"steps[14].if.value: contains wants a string",
		"steps[15].set.email: unknown field; allowed here: firstName, country, language, customFields",
		"steps[15].set.customFields.9x: want a custom field key: a letter, then letters, digits or '_', at most 64",
		"steps[15].set.customFields.ok: want a string, number, boolean or null",
		"steps[16].listId: required",
		"steps[17].listId: want a list id, not an empty string",
		`steps[18].type: required: one of "send_email", "delay", "wait_until", "wait_for_event", "branch", "update_contact", "add_to_list", "remove_from_list" or "exit"`,
		"steps[19]: want a step object with a type",
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("missing error %q", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("unexpected error %q", g)
		}
	}
	if !strings.HasPrefix(err.Error(), "invalid journey: colour: unknown field") {
		t.Errorf("Error() = %q", err.Error())
	}
}

func TestParseJourneyMissingParts(t *testing.T) {
	for src, want := range map[string][]string{
		`[]`: {"want a JSON object (the journey file)"},
		`{}`: {"name: required", `trigger: required: an object with type one of "api_event", "event", "website_event" or "list_joined"`,
			"steps: required: a list of steps"},
		`{"name":"n","trigger":{"type":"list_joined","event":"x"},"steps":[],"exitOn":{}}`: {
			"trigger.listId: required", "trigger.event: only event and website_event triggers have an event",
			`exitOn: want event (an event name) or goalType (one of "purchase", "subscription", "lead", "signup", "booking", "trial" or "other")`,
			"steps: want at least one step"},
		`{"name":"n","trigger":{"type":"api_event","event":"x"},"steps":[{"type":"exit"}]}`: {
			"trigger.event: an api_event trigger has no event: it starts with POST /public/journeys/trigger"},
		`{"name":"n","trigger":{},"steps":[{"type":"exit"}]}`: {`trigger.type: required: one of "api_event", "event", "website_event" or "list_joined"`},
	} {
		_, err := schemas.ParseJourney([]byte(src))
		var errs schemas.JourneyErrors
		if !errors.As(err, &errs) {
			t.Fatalf("%s: %v", src, err)
		}
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", src, got, want)
		}
	}
}

func TestParseJourneyDuration(t *testing.T) {
	for s, ok := range map[string]bool{"30m": true, "48h": true, "1h30m": true, "2d": true, "0d": false, "-1h": false,
		"0": false, "d": false, "1.5d": false, "02d": false, "": false, "1w": false} {
		if _, got := schemas.ParseJourneyDuration(s); got != ok {
			t.Errorf("%q: %v, want %v", s, got, ok)
		}
	}
}

// TestStepAddresses: FirstStep, Next and Enter walk the tree, leaving arms
// outwards, and StepAt refuses addresses that name nothing.
func TestStepAddresses(t *testing.T) {
	d := parseOK(t, `{"name":"n","trigger":{"type":"api_event"},"steps":[
	  {"type":"delay","duration":"1h"},
	  {"type":"branch","if":{"inList":"L"},
	   "then":[{"type":"delay","duration":"1h"},
	           {"type":"wait_for_event","event":"e","timeout":"1h","onTimeout":[{"type":"exit"}]}],
	   "else":[]},
	  {"type":"exit"}]}`)
	var addrs []string
	d.Walk(func(addr, path string, s *schemas.JourneyStep) { addrs = append(addrs, addr+"="+path) })
	wantWalk := []string{"0=steps[0]", "1=steps[1]", "1.then.0=steps[1].then[0]", "1.then.1=steps[1].then[1]",
		"1.then.1.onTimeout.0=steps[1].then[1].onTimeout[0]", "2=steps[2]"}
	if !slices.Equal(addrs, wantWalk) {
		t.Fatalf("Walk %q, want %q", addrs, wantWalk)
	}
	if a, ok := d.FirstStep(); !ok || a != "0" {
		t.Fatalf("FirstStep %q %v", a, ok)
	}
	next := func(addr string) string {
		n, done, err := d.Next(addr)
		if err != nil {
			t.Fatalf("Next(%s): %v", addr, err)
		}
		if done {
			return "done"
		}
		return n
	}
	enter := func(addr, arm string) string {
		n, done, err := d.Enter(addr, arm)
		if err != nil {
			t.Fatalf("Enter(%s, %s): %v", addr, arm, err)
		}
		if done {
			return "done"
		}
		return n
	}
	for _, c := range [][2]string{
		{next("0"), "1"}, {next("1.then.0"), "1.then.1"}, {next("1.then.1"), "2"},
		{next("1.then.1.onTimeout.0"), "2"}, {next("2"), "done"},
		{enter("1", "then"), "1.then.0"}, {enter("1", "else"), "2"},
		{enter("1.then.1", "onEvent"), "2"}, {enter("1.then.1", "onTimeout"), "1.then.1.onTimeout.0"},
	} {
		if c[0] != c[1] {
			t.Errorf("got %s, want %s", c[0], c[1])
		}
	}
	if s, err := d.StepAt("1.then.1.onTimeout.0"); err != nil || s.Type != schemas.StepExit {
		t.Errorf("StepAt: %v %v", s, err)
	}
	for _, bad := range []string{"", "3", "-1", "01", "1.then", "1.onEvent.0", "0.then.0", "1.then.5", "x"} {
		if _, err := d.StepAt(bad); err == nil {
			t.Errorf("StepAt(%q) found a step", bad)
		}
	}
	if _, _, err := d.Enter("0", "then"); err == nil {
		t.Error("Enter into a delay's arm succeeded")
	}
}
