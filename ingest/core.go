package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/valyala/fasthttp"

	"sendstream/schemas"
)

// Me is the answer of GET /v1/me: who the credential is.
type Me struct {
	Workspace MeWorkspace `json:"workspace"`
	Key       MeKey       `json:"key"`
	// App and Member are present for an OAuth access token only: the app
	// it was issued to and the member it acts as (Member absent for a
	// client_credentials token of an app without a creator).
	App    *MeApp    `json:"app,omitempty"`
	Member *MeMember `json:"member,omitempty"`
}

// MeApp is the OAuth app part of Me.
type MeApp struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// MeMember is the member part of Me.
type MeMember struct {
	ID string `json:"id"`
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
	authCacheGauge(s.deps.Metrics, "hit", func() float64 { h, _ := s.auth.Stats(); return float64(h) })
	authCacheGauge(s.deps.Metrics, "miss", func() float64 { _, m := s.auth.Stats(); return float64(m) })
	return []Route{
		{Method: "GET", Path: "/healthz", Credential: CredNone, Handle: func(*Call) Result {
			return OK(200, health{Status: "ok"})
		}},
		{Method: "GET", Path: "/readyz", Credential: CredNone, Handle: s.readyz},
		{Method: "GET", Path: "/metrics", Credential: CredNone, Handle: s.metricsText},
		{Method: "GET", Path: "/api/v1/me", Credential: CredKey, Limit: 60, Logged: true, Handle: me},
		// Spec 1, fact 4: also to a signed-in session (no rate limit then).
		{Method: "GET", Path: "/api/v1/openapi.json", Credential: CredKeyOrSession, Limit: 60, Logged: true,
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
	b = append(b, '}')
	if p.AppID != "" {
		b = schemas.AppendJSONString(append(b, `,"app":{"id":`...), p.AppID)
		b = schemas.AppendJSONString(append(b, `,"name":`...), p.AppName)
		b = append(b, '}')
		if p.MemberID != "" {
			b = schemas.AppendJSONString(append(b, `,"member":{"id":`...), p.MemberID)
			b = append(b, '}')
		}
	}
	return append(b, '}')
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

// metricsText is GET /metrics on the public listener: 404 unless
// Config.MetricsToken is set, then only with that bearer token (401
// otherwise). ServeMetrics serves the same text on a separate listener.
func (s *Server) metricsText(c *Call) Result {
	if s.cfg.MetricsToken == "" {
		return Fail(404, "not_found", "No route for GET /metrics")
	}
	tok, ok := bearer([]byte(c.Header("Authorization")))
	if !ok || !sameSecret(tok, s.cfg.MetricsToken) {
		return unauthorized("GET /metrics needs the metrics token: send Authorization: Bearer <SENDSTREAM_METRICS_TOKEN>")
	}
	return s.metricsAnswer()
}

// sameSecret compares a presented secret with the configured one in
// constant time (over their hashes, so the length leaks nothing either).
func sameSecret(got []byte, want string) bool {
	a, b := sha256.Sum256(got), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// metricsFormat is the Prometheus text exposition format, version 0.0.4.
var metricsFormat = expfmt.NewFormat(expfmt.TypeTextPlain)

// metricsAnswer gathers Deps.Gatherer and writes it in the Prometheus text
// format, families sorted by name.
func (s *Server) metricsAnswer() Result {
	mfs, err := s.deps.Gatherer.Gather()
	if err != nil && len(mfs) == 0 {
		return Fail(500, "internal_error", "gathering metrics: "+err.Error())
	}
	if err != nil { // one collector failed: serve the rest, as promhttp does by default
		s.log.Warn("gathering metrics", "err", err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, metricsFormat)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return Fail(500, "internal_error", "writing metrics: "+err.Error())
		}
	}
	if s.deps.ExtraMetrics != nil {
		s.deps.ExtraMetrics(&b)
	}
	return Result{Status: 200, Raw: b.Bytes(), ContentType: string(metricsFormat)}
}

// ServeMetrics serves GET /metrics, without a token, on ln (a separate,
// private listen address: SENDSTREAM_METRICS_LISTEN) until Shutdown; every
// other request there answers 404. Call it beside Serve, before Shutdown.
func (s *Server) ServeMetrics(ln net.Listener) error {
	srv := &fasthttp.Server{
		Name:                  "sendstream-metrics",
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true,
		ReadTimeout:           s.cfg.ReadTimeout,
		IdleTimeout:           s.cfg.ReadTimeout,
		Logger:                fastLogger{s.log},
		Handler: func(rc *fasthttp.RequestCtx) {
			baseHeaders(&rc.Response.Header, rc.Path())
			if string(rc.Path()) != "/metrics" || !(rc.IsGet() || rc.IsHead()) {
				writeError(rc, 404, ErrorBody{Error: "Only GET /metrics is served here", Code: "not_found"})
				return
			}
			res := s.metricsAnswer()
			rc.SetStatusCode(res.Status)
			if res.ContentType != "" {
				rc.SetContentType(res.ContentType)
			}
			rc.SetBody(encodeBody(res))
		},
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ln.Close()
	}
	s.extra = append(s.extra, srv)
	s.mu.Unlock()
	return srv.Serve(ln)
}
