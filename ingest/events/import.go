package events

import (
	"strconv"

	"sendstream/ingest"
	"sendstream/schemas"
)

// ImportResult is the answer of POST /v1/events/import (spec 4.6).
type ImportResult struct {
	Recorded   int         `json:"recorded"`
	Duplicates int         `json:"duplicates"`
	Failed     int         `json:"failed"`
	Results    []ImportRow `json:"results"`
}

// ImportRow is the outcome of one row. A row that was recorded (or was a
// duplicate) encodes index, id, contactId (null when no contact matched)
// and deduplicated; a failed row encodes index, error and code.
type ImportRow struct {
	Index        int
	ID           string
	ContactID    string
	Deduplicated bool
	Error        string
	Code         string
}

// MarshalJSON encodes the row as described on ImportRow.
func (r ImportRow) MarshalJSON() ([]byte, error) { return appendImportRow(nil, &r), nil }

// appendImportRow appends one row of the import answer.
func appendImportRow(b []byte, r *ImportRow) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(r.Index), 10)
	if r.ID == "" {
		b = append(b, `,"error":`...)
		b = schemas.AppendJSONString(b, r.Error)
		if r.Code != "" {
			b = append(b, `,"code":`...)
			b = schemas.AppendJSONString(b, r.Code)
		}
		return append(b, '}')
	}
	b = append(b, `,"id":`...)
	b = schemas.AppendJSONString(b, r.ID)
	b = append(b, `,"contactId":`...)
	if r.ContactID == "" {
		b = append(b, "null"...)
	} else {
		b = schemas.AppendJSONString(b, r.ContactID)
	}
	b = append(b, `,"deduplicated":`...)
	b = strconv.AppendBool(b, r.Deduplicated)
	return append(b, '}')
}

// appendImport appends the 200 answer of an import.
func appendImport(b []byte, out *ImportResult) []byte {
	b = append(b, `{"recorded":`...)
	b = strconv.AppendInt(b, int64(out.Recorded), 10)
	b = append(b, `,"duplicates":`...)
	b = strconv.AppendInt(b, int64(out.Duplicates), 10)
	b = append(b, `,"failed":`...)
	b = strconv.AppendInt(b, int64(out.Failed), 10)
	b = append(b, `,"results":[`...)
	for i := range out.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendImportRow(b, &out.Results[i])
	}
	return append(b, "]}"...)
}

// importFailed is the 400 answer when every row failed: the spec 7.1 error
// plus the per-row results and counts.
type importFailed struct {
	ingest.ErrorBody
	ImportResult
}

const importInvalid = "Invalid input"

// importEvents is POST /api/v1/events/import: the whole body is validated
// first (any row breaking the schema fails the call with 400 Invalid
// input, fields events[i].field); then every row is recorded on its own;
// rows without email/contactId or breaking a goal rule fail alone.
func (h *handlers) importEvents(c *ingest.Call) ingest.Result {
	var rawEvents []byte
	err := eachMember(c.Body, func(key, val []byte) {
		if keyIs(key, "events") {
			rawEvents = val
		}
	})
	if err != nil {
		return invalid(importInvalid+": the body must be an object with an events array", CodeInvalid, []string{"events"})
	}
	if rawEvents == nil || isNull(rawEvents) {
		return invalid(importInvalid+": events is required", CodeInvalid, []string{"events"})
	}
	var rows [][]byte
	if err := eachElement(rawEvents, func(_ int, v []byte) { rows = append(rows, v) }); err != nil {
		return invalid(importInvalid+": events must be an array", CodeInvalid, []string{"events"})
	}
	if len(rows) < 1 || len(rows) > ImportMaxRows {
		return invalid(importInvalid+": events must hold 1 to 50 events", CodeInvalid, []string{"events"})
	}

	inputs := make([]Input, len(rows))
	ruleErr := make([][]FieldError, len(rows))
	var fields []string
	var msgs []FieldError
	for i, raw := range rows {
		in, errs := Parse(raw, true)
		inputs[i] = in
		var schemaErrs []FieldError
		for _, e := range errs {
			if e.Rule {
				ruleErr[i] = append(ruleErr[i], e)
			} else {
				schemaErrs = append(schemaErrs, e)
			}
		}
		if len(schemaErrs) > 0 {
			fields = append(fields, fieldsOf("events["+itoa(i)+"]", schemaErrs)...)
			for _, e := range schemaErrs {
				if e.Msg != "" {
					e.Msg = "events[" + itoa(i) + "]: " + e.Msg
				}
				msgs = append(msgs, e)
			}
		}
	}
	if len(fields) > 0 {
		return invalid(errorMessage(importInvalid, msgs), CodeInvalid, fields)
	}

	ws := c.Principal.Workspace
	out := ImportResult{Results: make([]ImportRow, len(rows))}
	lookups := make([]Lookup, 0, len(rows))
	index := make([]int, 0, len(rows)) // lookups[k] is row index[k]
	for i := range rows {
		out.Results[i].Index = i
		if len(ruleErr[i]) > 0 {
			out.Results[i].Error = errorMessage("", ruleErr[i])[2:]
			out.Results[i].Code = errorCode(ruleErr[i])
			out.Failed++
			continue
		}
		lookups = append(lookups, lookupOf(ws, &inputs[i]))
		index = append(index, i)
	}
	if out.Failed == len(rows) {
		var rf []string
		for i := range rows {
			rf = append(rf, fieldsOf("events["+itoa(i)+"]", ruleErr[i])...)
		}
		return ingest.Result{Status: 400, Body: importFailed{
			ErrorBody:    ingest.ErrorBody{Error: importInvalid + ": every row failed", Code: errorCode(flatten(ruleErr)), Fields: rf},
			ImportResult: out,
		}}
	}

	resolved := make([]Resolution, len(lookups))
	if err := h.store.Resolve(c.Ctx, lookups, resolved); err != nil {
		return unavailable()
	}
	now := h.now().UTC()
	res := ingest.Result{Status: 200}
	for k, i := range index {
		a := accept(ws, &inputs[i], &lookups[k], &resolved[k], schemas.EventSourceImport, now, c.BodyCompact)
		row := &out.Results[i]
		row.ID = a.id
		cid := a.contactID
		row.ContactID = cid
		row.Deduplicated = a.dup
		if a.dup {
			out.Duplicates++
		} else {
			out.Recorded++
			res.Produced.EventIDs = append(res.Produced.EventIDs, a.id)
			if cid != "" && !contains(res.Produced.ContactIDs, cid) {
				res.Produced.ContactIDs = append(res.Produced.ContactIDs, cid)
			}
		}
		if a.publish {
			res.Publish = append(res.Publish, ingest.Message{Topic: schemas.TopicEvents, Env: a.env})
		}
	}
	res.Raw = appendImport(make([]byte, 0, 64+96*len(out.Results)), &out)
	return res
}

func flatten(errs [][]FieldError) []FieldError {
	var out []FieldError
	for _, e := range errs {
		out = append(out, e...)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
