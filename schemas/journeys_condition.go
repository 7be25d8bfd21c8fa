package schemas

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// conditionFields are every member a branch condition may have.
var conditionFields = []string{"all", "any", "not", "field", "customField", "property", "op", "value",
	"inList", "goal", "countAtLeast", "valueAtLeast", "lastWithin"}

// conditionForms are the members that select a condition's form.
var conditionForms = []string{"all", "any", "not", "field", "customField", "property", "inList", "goal"}

// condition parses one branch condition at path (see JourneyCondition).
func (p *journeyParser) condition(path string, raw []byte) *JourneyCondition {
	obj, ok := p.object(path, raw, conditionFields...)
	if !ok {
		return nil
	}
	c := &JourneyCondition{}
	var forms []string
	for _, f := range conditionForms {
		if _, has := obj[f]; has {
			forms = append(forms, f)
		}
	}
	if len(forms) != 1 {
		if len(forms) == 0 {
			p.add(path, "want a condition: one of all, any, not, field, customField, property, inList or goal")
		} else {
			p.add(path, "want one condition form, not "+strings.Join(forms, " and ")+" together (combine them with all or any)")
		}
		return c
	}
	form := forms[0]
	// Members that belong to another form are errors.
	allowed := map[string][]string{
		"all": {"all"}, "any": {"any"}, "not": {"not"}, "inList": {"inList"},
		"field": {"field", "op", "value"}, "customField": {"customField", "op", "value"}, "property": {"property", "op", "value"},
		"goal": {"goal", "countAtLeast", "valueAtLeast", "lastWithin"},
	}[form]
	for _, k := range conditionFields {
		if _, has := obj[k]; has && !slices.Contains(allowed, k) {
			p.add(path+"."+k, "not part of a "+form+" condition")
		}
	}
	switch form {
	case "all", "any":
		list := p.conditions(path+"."+form, obj[form])
		if form == "all" {
			c.All = list
		} else {
			c.Any = list
		}
	case "not":
		c.Not = p.condition(path+".not", obj["not"])
	case "inList":
		c.InList = p.str(obj, path, "inList", true)
		if c.InList == "" && p.isString(obj["inList"]) {
			p.add(path+".inList", "want a list id, not an empty string")
		}
	case "field":
		c.Field = p.enum(obj, path, "field", ContactConditionFields, "")
		p.comparison(c, obj, path)
		if c.Field == "status" && c.Value != nil && (c.Op == OpEq || c.Op == OpNe) {
			var s string
			if json.Unmarshal(c.Value, &s) != nil || !slices.Contains(ContactStatuses, s) {
				p.add(path+".value", "want a contact status: "+orList(ContactStatuses))
			}
		}
	case "customField":
		c.CustomField = p.str(obj, path, "customField", true)
		if c.CustomField != "" && !customFieldKey.MatchString(c.CustomField) {
			p.add(path+".customField", "want a custom field key: a letter, then letters, digits or '_', at most 64")
		}
		p.comparison(c, obj, path)
	case "property":
		c.Property = p.str(obj, path, "property", true)
		if c.Property != "" && slices.Contains(strings.Split(c.Property, "."), "") {
			p.add(path+".property", `want a dot path into the trigger's properties or data, e.g. "plan" or "order.total"`)
		}
		p.comparison(c, obj, path)
	case "goal":
		p.goal(c, obj, path)
	}
	return c
}

// ContactStatuses lists every contact status (spec 2.1).
var ContactStatuses = []string{"ACTIVE", "UNSUBSCRIBED", "BOUNCED", "COMPLAINED", "PENDING"}

func (p *journeyParser) conditions(path string, raw []byte) []JourneyCondition {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		p.add(path, "want a list of conditions")
		return nil
	}
	if len(items) == 0 {
		p.add(path, "want at least one condition")
	}
	out := make([]JourneyCondition, len(items))
	for i, it := range items {
		if c := p.condition(path+"["+strconv.Itoa(i)+"]", it); c != nil {
			out[i] = *c
		}
	}
	return out
}

// comparison reads op and value of a field, customField or property
// condition.
func (p *journeyParser) comparison(c *JourneyCondition, obj map[string]json.RawMessage, path string) {
	if _, has := obj["op"]; !has {
		p.add(path+".op", "required: "+orList(ConditionOps))
		return
	}
	c.Op = p.enum(obj, path, "op", ConditionOps, "")
	raw, hasValue := obj["value"]
	raw = bytes.TrimSpace(raw)
	switch {
	case c.Op == "":
	case c.Op == OpExists:
		if hasValue {
			p.add(path+".value", "exists takes no value")
		}
	case !hasValue:
		p.add(path+".value", "required with op "+strconv.Quote(c.Op))
	case len(raw) > 0 && (raw[0] == '{' || raw[0] == '['):
		p.add(path+".value", "want a string, number, boolean or null")
	case c.Op == OpContains && !p.isString(raw):
		p.add(path+".value", "contains wants a string")
	case (c.Op == OpGt || c.Op == OpGte || c.Op == OpLt || c.Op == OpLte) && !(p.isString(raw) || isNumberLiteral(raw)):
		p.add(path+".value", c.Op+" wants a number, or a string (ISO 8601 dates compare by time)")
	default:
		c.Value = json.RawMessage(raw)
	}
}

func isNumberLiteral(raw []byte) bool {
	var f float64
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') && json.Unmarshal(raw, &f) == nil
}

// goal reads a goal-totals condition.
func (p *journeyParser) goal(c *JourneyCondition, obj map[string]json.RawMessage, path string) {
	c.Goal = p.enum(obj, path, "goal", GoalTypes, "")
	n := 0
	if raw, ok := obj["countAtLeast"]; ok {
		n++
		var v int64
		if json.Unmarshal(raw, &v) != nil || v < 0 {
			p.add(path+".countAtLeast", "want a whole number, 0 or more")
		} else {
			c.CountAtLeast = &v
		}
	}
	if raw, ok := obj["valueAtLeast"]; ok {
		n++
		var v float64
		if !isNumberLiteral(bytes.TrimSpace(raw)) || json.Unmarshal(raw, &v) != nil {
			p.add(path+".valueAtLeast", "want a number (the lifetime value of the goal: the sum of its values, refunds subtracted)")
		} else {
			c.ValueAtLeast = &v
		}
	}
	if raw, ok := obj["lastWithin"]; ok {
		n++
		var s string
		if json.Unmarshal(raw, &s) != nil {
			p.add(path+".lastWithin", `want a duration string such as "30d"`)
		} else if _, ok := ParseJourneyDuration(s); !ok {
			p.add(path+".lastWithin", `want a positive duration such as "24h" or "30d", not `+strconv.Quote(s))
		} else {
			c.LastWithin = s
		}
	}
	if n == 0 {
		p.add(path, "want countAtLeast, valueAtLeast or lastWithin with goal")
	}
}
