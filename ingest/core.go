package ingest

import (
	"bytes"
	"context"
	"strconv"
	"time"

	"sendstream/schemas"
)

// Me is the answer of GET /v1/me: who the credential is.
type Me struct {
	Workspace MeWorkspace `json:"workspace"`
	Key       MeKey       `json:"key"`
}

// MeWorkspace is the workspace part of Me.
type MeWorkspace struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Plan string `json:"plan"`
}

// MeKey is the credential part of Me (an API key or OAuth token; named
// "key" so the request log's secret redaction leaves it readable). Scopes is
// empty (and FullAccess true) for a key without scopes.
type MeKey struct {
	ID         string   `json:"id"`
	Kind       string   `json:"kind"`
	Scopes     []string `json:"scopes"`
	FullAccess bool     `json:"fullAccess"`
}

type health struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Code   string `json:"code,omitempty"`
}

// coreRoutes are the routes every server has: operations at the site root
// and the identity and OpenAPI endpoints.
func (s *Server) coreRoutes() []Route {
	s.deps.Metrics.GaugeFunc(metricAuthCache, func() float64 { h, _ := s.auth.Stats(); return float64(h) }, "result", "hit")
	s.deps.Metrics.GaugeFunc(metricAuthCache, func() float64 { _, m := s.auth.Stats(); return float64(m) }, "result", "miss")
	return []Route{
		{Method: "GET", Path: "/healthz", Credential: CredNone, Handle: func(*Call) Result {
			return OK(200, health{Status: "ok"})
		}},
		{Method: "GET", Path: "/readyz", Credential: CredNone, Handle: s.readyz},
		{Method: "GET", Path: "/metrics", Credential: CredNone, Handle: s.metricsText},
		{Method: "GET", Path: "/api/v1/me", Credential: CredKey, Limit: 60, Logged: true, Handle: me},
		{Method: "GET", Path: "/api/v1/openapi.json", Credential: CredKey, Limit: 60, Logged: true,
			Handle: func(*Call) Result { return Result{Status: 200, Raw: s.openapi} }},
	}
}

func me(c *Call) Result {
	return Result{Status: 200, Raw: appendMe(make([]byte, 0, 256), c.Principal), RawJSON: true}
}

// appendMe writes the Me answer of p, as encoding/json would write Me.
func appendMe(b []byte, p Principal) []byte {
	b = append(b, `{"workspace":{"id":`...)
	b = schemas.AppendJSONString(b, p.Workspace)
	b = append(b, `,"name":`...)
	b = schemas.AppendJSONString(b, p.WorkspaceName)
	b = append(b, `,"plan":`...)
	b = schemas.AppendJSONString(b, p.Plan)
	b = append(b, `},"key":{"id":`...)
	b = schemas.AppendJSONString(b, p.KeyID)
	b = append(b, `,"kind":`...)
	b = schemas.AppendJSONString(b, p.Kind)
	scopes := p.Scopes
	if scopes == nil {
		scopes = []string{} // full access: an empty list, never null
	}
	b = schemas.AppendJSONStrings(append(b, `,"scopes":`...), scopes)
	b = append(b, `,"fullAccess":`...)
	b = strconv.AppendBool(b, len(p.Scopes) == 0)
	return append(b, "}}"...)
}

func (s *Server) readyz(c *Call) Result {
	if s.deps.Ready == nil {
		return OK(200, health{Status: "ok"})
	}
	ctx, cancel := context.WithTimeout(c.Ctx, 5*time.Second)
	defer cancel()
	if err := s.deps.Ready(ctx); err != nil {
		return OK(503, health{Status: "unavailable", Error: err.Error(), Code: "not_ready"})
	}
	return OK(200, health{Status: "ok"})
}

func (s *Server) metricsText(*Call) Result {
	var b bytes.Buffer
	if err := s.deps.Metrics.WritePrometheus(&b); err != nil {
		return Fail(500, "internal_error", "writing metrics: "+err.Error())
	}
	if s.deps.ExtraMetrics != nil {
		s.deps.ExtraMetrics(&b)
	}
	return Result{Status: 200, Raw: b.Bytes(), ContentType: "text/plain; version=0.0.4; charset=utf-8"}
}
