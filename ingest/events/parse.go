package events

import (
	"math"
	"strconv"
	"strings"
	"time"

	"sendstream/ingest/contacts"
	"sendstream/schemas"
)

// Limits of an event (spec 2.3 and 8.2; documented in the OpenAPI fragment).
// externalId, contactId and value have no limit of their own beyond what
// storage can hold: value must be a finite float64 (ClickHouse keeps it as
// Float64).
const (
	MaxNameLen    = 100        // spec 2.3 / 8.2
	ImportMaxRows = 50         // spec 8.2
	maxDateTime   = 4291747199 // 2105-12-31T23:59:59Z: ClickHouse DateTime holds up to 2106
	// maxValueText is the longest value kept as sent; a longer one (more
	// digits than a float64 carries) is stored as its float64 value, so
	// Postgres numeric never meets more than 16383 digits after the point.
	maxValueText = 40
)

// Error codes of event validation (the `code` of a 400).
const (
	CodeInvalid         = "validation_error"   // a field breaks the schema (as contacts)
	CodeContactRequired = "contact_required"   // neither email nor contactId on /v1
	CodeValueRequired   = "value_required"     // purchase/subscription goal without value
	CodeValueNeedsGoal  = "value_without_goal" // value without goalType
)

// Input is one validated, normalised event.
type Input struct {
	Event      string
	Email      string // trimmed and lower-cased
	ContactID  string
	GoalType   string
	Value      string // the JSON number as sent; "" when absent
	Currency   string // upper case
	ExternalID string
	OccurredAt time.Time // zero: now
	Properties []byte    // raw JSON object, nil when absent; aliases the body
}

// FieldError is one failed rule of one field. Rule errors are business
// rules (contact identity, goal value); the others break the schema. The
// import endpoint fails the whole call on schema errors and only the row on
// rule errors.
type FieldError struct {
	Field string
	Code  string
	Msg   string
	Rule  bool
}

// Parse validates one event object (spec 2.3). requireContact is true on
// /v1 endpoints, where email or contactId is required. It returns every
// failed rule, or none.
func Parse(raw []byte, requireContact bool) (Input, []FieldError) {
	var in Input
	var errs []FieldError
	bad := func(field, msg string) {
		errs = append(errs, FieldError{Field: field, Code: CodeInvalid, Msg: msg})
	}
	var rawEvent, rawEmail, rawContact, rawGoal, rawValue, rawCurrency, rawExt, rawAt, rawProps []byte
	err := eachMember(raw, func(key, val []byte) {
		switch {
		case keyIs(key, "event"):
			rawEvent = val
		case keyIs(key, "email"):
			rawEmail = val
		case keyIs(key, "contactId"):
			rawContact = val
		case keyIs(key, "goalType"):
			rawGoal = val
		case keyIs(key, "value"):
			rawValue = val
		case keyIs(key, "currency"):
			rawCurrency = val
		case keyIs(key, "externalId"):
			rawExt = val
		case keyIs(key, "occurredAt"):
			rawAt = val
		case keyIs(key, "properties"):
			rawProps = val
		}
	})
	if err != nil {
		return in, []FieldError{{Field: "", Code: CodeInvalid, Msg: "the event must be a JSON object"}}
	}

	// event
	if rawEvent == nil || isNull(rawEvent) {
		bad("event", "event is required")
	} else if s, ok := decodeString(rawEvent); !ok {
		bad("event", "event must be a string")
	} else if msg := checkName(s); msg != "" {
		bad("event", msg)
	} else {
		in.Event = s
	}

	// email
	if rawEmail != nil && !isNull(rawEmail) {
		if s, ok := decodeString(rawEmail); !ok {
			bad("email", "email must be a string")
		} else if e, err := contacts.NormalizeEmail(s); err != nil {
			bad("email", "email must be a valid email address")
		} else {
			in.Email = e
		}
	}

	// contactId
	if rawContact != nil && !isNull(rawContact) {
		if s, ok := decodeString(rawContact); !ok {
			bad("contactId", "contactId must be a string")
		} else if s = strings.TrimSpace(s); s == "" {
			bad("contactId", "contactId must be a non-empty string")
		} else {
			in.ContactID = s
		}
	}

	// goalType
	goalOK := true
	if rawGoal != nil && !isNull(rawGoal) {
		s, ok := decodeString(rawGoal)
		if !ok || !validGoal(s) {
			goalOK = false
			bad("goalType", "goalType must be one of "+strings.Join(schemas.GoalTypes, ", "))
		} else {
			in.GoalType = s
		}
	}

	// value
	valueOK := true
	if rawValue != nil && !isNull(rawValue) {
		if !isNumber(rawValue) {
			valueOK = false
			bad("value", "value must be a number")
		} else if v, ok := valueText(rawValue); !ok {
			valueOK = false
			bad("value", "value must be a finite number (at most about 1.8e308 in size)")
		} else {
			in.Value = v
		}
	}

	// currency
	if rawCurrency != nil && !isNull(rawCurrency) {
		if s, ok := decodeString(rawCurrency); !ok {
			bad("currency", "currency must be a string")
		} else if c, ok := normalizeCurrency(s); !ok {
			bad("currency", "currency must be a 3-letter ISO 4217 currency code")
		} else {
			in.Currency = c
		}
	}

	// externalId
	if rawExt != nil && !isNull(rawExt) {
		if s, ok := decodeString(rawExt); !ok {
			bad("externalId", "externalId must be a string")
		} else if s == "" {
			bad("externalId", "externalId must be a non-empty string")
		} else {
			in.ExternalID = s
		}
	}

	// occurredAt
	if rawAt != nil && !isNull(rawAt) {
		if s, ok := decodeString(rawAt); !ok {
			bad("occurredAt", "occurredAt must be an ISO 8601 date-time string")
		} else if t, ok := parseTime(s); !ok {
			bad("occurredAt", "occurredAt must be an ISO 8601 date-time with a time zone, e.g. 2025-01-31T12:00:00Z")
		} else if t.Unix() < 1 || t.Unix() > maxDateTime {
			bad("occurredAt", "occurredAt must be between 1970-01-01T00:00:01Z and 2105-12-31T23:59:59Z")
		} else {
			in.OccurredAt = t
		}
	}

	// properties
	if rawProps != nil && !isNull(rawProps) {
		// No size rule of its own (spec 2.3 has none): the body cap of the
		// route (spec 8.2) bounds it, and it is stored in full.
		if rawProps[0] != '{' {
			bad("properties", "properties must be an object")
		} else {
			in.Properties = rawProps
		}
	}

	// Business rules (spec 2.3, 7.2).
	if requireContact && in.Email == "" && in.ContactID == "" && !has(errs, "email") && !has(errs, "contactId") {
		errs = append(errs, FieldError{Field: "email", Code: CodeContactRequired, Rule: true,
			Msg: "email or contactId is required to identify the contact"})
		errs = append(errs, FieldError{Field: "contactId", Code: CodeContactRequired, Rule: true})
	}
	if valueOK && in.Value != "" && in.GoalType == "" && goalOK {
		errs = append(errs, FieldError{Field: "value", Code: CodeValueNeedsGoal, Rule: true,
			Msg: "value is accepted only together with goalType"})
	}
	if valueOK && in.Value == "" && (in.GoalType == schemas.GoalPurchase || in.GoalType == schemas.GoalSubscription) {
		errs = append(errs, FieldError{Field: "value", Code: CodeValueRequired, Rule: true,
			Msg: "value is required when goalType is " + in.GoalType})
	}
	return in, errs
}

func has(errs []FieldError, field string) bool {
	for _, e := range errs {
		if e.Field == field {
			return true
		}
	}
	return false
}

// checkName applies the spec 2.3 name rules and returns what is wrong.
func checkName(s string) string {
	switch {
	case s == "":
		return "event must not be empty"
	case len(s) > MaxNameLen:
		return "event must be at most 100 characters"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return "event must start with a lowercase letter or a digit"
		}
		if !alnum && c != '.' && c != '_' && c != '/' && c != '-' {
			return "event may contain only lowercase letters, digits, '.', '_', '/' and '-'"
		}
	}
	return ""
}

func validGoal(s string) bool {
	for _, g := range schemas.GoalTypes {
		if g == s {
			return true
		}
	}
	return false
}

// isNumber reports whether raw is a JSON number literal.
func isNumber(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	c := raw[0]
	return c == '-' || c >= '0' && c <= '9'
}

// parseTime accepts RFC 3339 date-times (the ISO 8601 profile with a time
// zone: Z or ±hh:mm; fractional seconds optional).
func parseTime(s string) (time.Time, bool) {
	if len(s) < 20 || (s[10] != 'T' && s[10] != 't') {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// errorMessage joins the messages of errs for one 400 answer.
func errorMessage(prefix string, errs []FieldError) string {
	var b strings.Builder
	b.WriteString(prefix)
	sep := ": "
	for _, e := range errs {
		if e.Msg == "" {
			continue
		}
		b.WriteString(sep)
		b.WriteString(e.Msg)
		sep = "; "
	}
	return b.String()
}

// errorCode is the code of a 400 for errs: the shared code when every
// failure has the same one, else CodeInvalid.
func errorCode(errs []FieldError) string {
	code := ""
	for _, e := range errs {
		if code == "" {
			code = e.Code
		} else if code != e.Code {
			return CodeInvalid
		}
	}
	if code == "" {
		return CodeInvalid
	}
	return code
}

// valueText is the decimal text kept for a goal value: the number as sent
// when it is short, else its float64 value ("0" for one that underflows).
// ok is false for a number beyond float64's range.
func valueText(raw []byte) (string, bool) {
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", false
	}
	if f == 0 {
		return "0", true
	}
	if len(raw) <= maxValueText {
		return string(raw), true
	}
	return strconv.FormatFloat(f, 'f', -1, 64), true
}
