package ingesttest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/paths"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"sendstream/schemas"
)

type openapiValidator struct {
	v     validator.Validator
	model *v3.Document
	mu    sync.Mutex // libopenapi builds schemas lazily and is not safe for concurrent use
}

func newOpenAPIValidator() (*openapiValidator, error) {
	raw, err := schemas.OpenAPI("http://127.0.0.1:8080")
	if err != nil {
		return nil, err
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		return nil, fmt.Errorf("validator: %v", errs)
	}
	return &openapiValidator{v: v, model: &m.Model}, nil
}

// ValidateDocument checks the assembled OpenAPI document against the
// OpenAPI 3.1 schema and returns every problem found.
func ValidateDocument() []string {
	docOnce.Do(func() { docVal, docErr = newOpenAPIValidator() })
	if docErr != nil {
		return []string{docErr.Error()}
	}
	ok, errs := docVal.v.ValidateDocument()
	if ok {
		return nil
	}
	var out []string
	for _, e := range errs {
		out = append(out, describe(e.Message, e.Reason, e.SchemaValidationErrors))
	}
	if len(out) == 0 {
		out = append(out, "invalid, with no detail")
	}
	return out
}

func (o *openapiValidator) validate(req *http.Request, resp *http.Response, body []byte) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	item, errs, _ := paths.FindPath(req, o.model)
	if item == nil || len(errs) > 0 {
		return "" // not described: nothing to check
	}
	if op := item.GetOperations(); op == nil || op.GetOrZero(strings.ToLower(req.Method)) == nil {
		return "" // method not described (405 and preflights)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	ok, verrs := o.v.ValidateHttpResponse(req, resp)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if ok {
		return ""
	}
	var b strings.Builder
	for _, e := range verrs {
		b.WriteString("  - ")
		b.WriteString(describe(e.Message, e.Reason, e.SchemaValidationErrors))
		b.WriteByte('\n')
	}
	return b.String()
}

func describe[T any](msg, reason string, details []T) string {
	s := msg
	if reason != "" {
		s += ": " + reason
	}
	for _, d := range details {
		s += fmt.Sprintf("; %+v", d)
	}
	return s
}
