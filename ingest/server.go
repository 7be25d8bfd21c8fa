package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"sendstream/ingest/auth"
	"sendstream/ingest/ratelimit"
	"sendstream/schemas"
)

// Server is the HTTP edge. Create it with New, add feature routes with Add,
// then Serve; Shutdown drains it. Add must not be called after Serve.
type Server struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	auth    *auth.Cache
	limiter *ratelimit.Limiter
	router  router
	fast    *fasthttp.Server
	metrics *serverMetrics
	openapi []byte
	csrf    *http.CrossOriginProtection // sameOrigin

	base   context.Context // cancelled when Shutdown's grace ends
	reqCtx *deadlines      // request contexts: RequestTimeout, shared per 100 ms
	cancel context.CancelFunc
	start  sync.Once
	bg     sync.WaitGroup
	logq   chan schemas.Envelope
	stopq  chan struct{}

	pool sync.Pool // *reqState

	mu     sync.Mutex
	closed bool               // Shutdown began
	extra  []*fasthttp.Server // ServeMetrics listeners
}

// New builds a Server with the site-root routes (/healthz, /readyz,
// /metrics) and the core API routes (GET /api/v1/me, GET
// /api/v1/openapi.json). It starts nothing.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.withDefaults()
	if deps.PG == nil && deps.Auth == nil {
		return nil, errors.New("ingest: Deps.PG is required")
	}
	if deps.Publisher == nil {
		return nil, errors.New("ingest: Deps.Publisher is required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Metrics == nil {
		deps.Metrics = prometheus.DefaultRegisterer
	}
	if deps.Gatherer == nil {
		deps.Gatherer = prometheus.DefaultGatherer
		if g, ok := deps.Metrics.(prometheus.Gatherer); ok {
			deps.Gatherer = g
		}
	}
	src := deps.Auth
	if src == nil {
		src = auth.NewStore(deps.PG)
	}
	doc, err := schemas.OpenAPI(cfg.SiteURL)
	if err != nil {
		return nil, fmt.Errorf("ingest: assemble OpenAPI document: %w", err)
	}
	csrf, err := newCrossOrigin(cfg.SiteURL)
	if err != nil {
		return nil, fmt.Errorf("ingest: site URL %q: %w", cfg.SiteURL, err)
	}
	s := &Server{
		csrf:    csrf,
		cfg:     cfg,
		deps:    deps,
		log:     deps.Logger,
		auth:    auth.NewCache(src, auth.CacheConfig{TTL: cfg.KeyCacheTTL}),
		metrics: newServerMetrics(deps.Metrics),
		openapi: doc,
		logq:    make(chan schemas.Envelope, cfg.LogQueue),
		stopq:   make(chan struct{}),
	}
	if deps.PG != nil {
		s.limiter = ratelimit.New(deps.PG, cfg.RateLimit)
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.reqCtx = newDeadlines(s.base, s.cfg.RequestTimeout)
	s.pool.New = func() any { return newReqState() }
	s.fast = &fasthttp.Server{
		Handler:            s.handle,
		ErrorHandler:       s.handleReadError,
		Name:               "sendstream",
		MaxRequestBodySize: maxBody,
		ReadBufferSize:     16 << 10, // request line + headers; larger answer 431
		// Multipart bodies are not parsed while reading: no route takes
		// them, so they get 415 like any other type a route does not read
		// (pre-parsing answered a malformed one 400 before routing).
		DisablePreParseMultipartForm: true,
		// No ReadTimeout or IdleTimeout: Serve's timeoutListener enforces
		// cfg.ReadTimeout for less per request.
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true,
		Logger:                fastLogger{deps.Logger},
	}
	s.Add(s.coreRoutes()...)
	return s, nil
}

// SetLimiter replaces the rate limiter (tests tune lease sizes this way).
// Call it before Serve.
func (s *Server) SetLimiter(l *ratelimit.Limiter) { s.limiter = l }

// Add registers routes. It panics on an invalid or duplicate route, a
// missing handler, or a route with a rate limit but no credential: these are
// programming errors found at start-up.
func (s *Server) Add(routes ...Route) {
	for _, r := range routes {
		if r.Handle == nil {
			panic(fmt.Sprintf("ingest: route %s %s has no handler", r.Method, r.Path))
		}
		if r.Limit > 0 && r.Credential == CredNone {
			panic(fmt.Sprintf("ingest: route %s %s: a rate limit needs a credential (limits are per workspace)", r.Method, r.Path))
		}
		rt := &route{Route: r, limitName: r.LimitName, bodyCap: r.BodyCap}
		if rt.limitName == "" {
			rt.limitName = r.Method + " " + r.Path
		}
		if rt.bodyCap == 0 {
			rt.bodyCap = surfaceCap(r.Path)
		}
		rt.metrics = s.metrics.route(r.Method, r.Path)
		if err := s.router.add(rt); err != nil {
			panic("ingest: " + err.Error())
		}
	}
}

// surfaceCap is the spec 8.2 body cap of a path.
func surfaceCap(path string) int {
	switch {
	case strings.HasPrefix(path, "/api/v1/"):
		return CapV1
	case strings.HasPrefix(path, "/api/public/"):
		return CapPublic
	case path == "/api/mcp" || strings.HasPrefix(path, "/api/mcp/"):
		return CapMCP
	}
	return CapOther
}

// Serve accepts connections on ln until Shutdown. The first call also
// starts the background work (rate-limit sweeps, the request-log queue).
func (s *Server) Serve(ln net.Listener) error {
	s.start.Do(func() {
		s.bg.Add(2)
		go s.sweepLoop()
		go s.logLoop()
	})
	return s.fast.Serve(newTimeoutListener(ln, s.cfg.ReadTimeout))
}

// Shutdown stops accepting connections, waits for in-flight requests (their
// publishes included) and the request-log queue to drain, bounded by ctx,
// then stops background work. In-flight requests keep running when ctx ends
// first; their contexts are cancelled then.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	extra := s.extra
	s.mu.Unlock()
	for _, srv := range extra {
		_ = srv.ShutdownWithContext(ctx) // metrics scrapes: nothing to drain
	}
	err := s.fast.ShutdownWithContext(ctx)
	close(s.stopq)
	done := make(chan struct{})
	go func() { s.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	s.cancel()
	if err != nil {
		return fmt.Errorf("ingest shutdown: %w", err)
	}
	return nil
}

func (s *Server) sweepLoop() {
	defer s.bg.Done()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-s.stopq:
			return
		case <-t.C:
			if s.limiter == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(s.base, 10*time.Second)
			if err := s.limiter.Sweep(ctx); err != nil {
				s.log.Warn("rate-limit sweep failed", "err", err)
			}
			cancel()
		}
	}
}

// reqState is the per-request scratch reused through a pool, so a request
// allocates little beyond what its handler does.
type reqState struct {
	rc     *fasthttp.RequestCtx
	call   Call
	spans  [maxParams]paramSpan
	header func(string) string
	query  func(string) string
	has    func(string) bool
}

func newReqState() *reqState {
	st := &reqState{}
	st.header = func(name string) string { return string(st.rc.Request.Header.Peek(name)) }
	st.query = func(name string) string { return string(st.rc.QueryArgs().Peek(name)) }
	st.has = func(name string) bool { return st.rc.QueryArgs().Has(name) }
	return st
}

// handle is the fasthttp handler: route, cap, authenticate, check scope,
// suspension and rate limit, validate JSON, run the handler, publish, answer.
func (s *Server) handle(rc *fasthttp.RequestCtx) {
	start := rc.Time() // fasthttp reads the clock as the request is handed over
	if start.IsZero() {
		start = time.Now()
	}
	st := s.pool.Get().(*reqState)
	st.rc = rc
	defer func() {
		st.rc = nil
		st.call = Call{}
		s.pool.Put(st)
	}()

	baseHeaders(&rc.Response.Header, rc.Path())
	n := s.router.match(rc.Path(), &st.spans)
	if n == nil {
		s.metrics.unmatched.Inc()
		writeError(rc, 404, ErrorBody{Error: "No route for " + string(rc.Method()) + " " + string(rc.Path()), Code: "not_found"})
		return
	}
	if n.cors {
		rc.Response.Header.Set("Access-Control-Allow-Origin", "*")
	}
	rt := n.methods[string(rc.Method())]
	if rt == nil {
		if n.cors && rc.IsOptions() {
			s.preflight(rc, n)
			return
		}
		s.metrics.unmatched.Inc()
		rc.Response.Header.Set("Allow", n.allow)
		writeError(rc, 405, ErrorBody{Error: "Method " + string(rc.Method()) + " is not allowed here; allowed: " + n.allow, Code: "method_not_allowed"})
		return
	}
	s.serve(rc, st, rt, start)
}

// serve runs every check, then the handler, and hands the answer to finish.
func (s *Server) serve(rc *fasthttp.RequestCtx, st *reqState, rt *route, start time.Time) {
	ctx := s.reqCtx.at(start)
	var compact bool
	res, p, ok := s.check(ctx, rc, rt, start, &compact)
	if ok {
		res, ok = checkURLText(rc, st.spans[:len(rt.params)])
	}
	if !ok {
		s.finish(ctx, rc, rt, res, p, "", start, compact)
		return
	}
	c := &st.call
	*c = Call{
		Ctx: ctx, Principal: p, Method: string(rc.Method()), Path: string(rc.Path()),
		Body: rc.PostBody(), BodyCompact: compact, Query: st.query, HasQuery: st.has, Header: st.header, RequestID: schemas.NewIDAt(start),
	}
	if rt.SameOrigin || rt.Credential == CredSession {
		c.RemoteIP = rc.RemoteIP().String() // browser routes only: it allocates
	}
	if len(rt.params) > 0 {
		c.Params = make(map[string]string, len(rt.params))
		path := rc.Path()
		for i, name := range rt.params {
			c.Params[name] = string(path[st.spans[i].start:st.spans[i].end])
		}
	}
	res = s.runHandler(rt, c)
	s.finish(ctx, rc, rt, res, p, c.RequestID, start, compact)
}

// check applies the body cap, authentication, scope, suspension, rate limit
// and JSON checks in that order. ok false means res is the answer; p is the
// principal when authentication succeeded (zero otherwise). *compact is set
// when the body was checked to be JSON without whitespace outside strings.
func (s *Server) check(ctx context.Context, rc *fasthttp.RequestCtx, rt *route, start time.Time, compact *bool) (res Result, p Principal, ok bool) {
	body := rc.PostBody()
	if len(body) > rt.bodyCap || rc.Request.Header.ContentLength() > rt.bodyCap {
		return tooLarge(rt.bodyCap), Principal{}, false
	}
	session := rt.Credential == CredSession ||
		rt.Credential == CredKeyOrSession && len(rc.Request.Header.Peek("Authorization")) == 0
	if rt.SameOrigin || session {
		if res, ok := s.sameOrigin(rc); !ok {
			return res, Principal{}, false
		}
	}
	var mult int64 = 1
	if session {
		sp, suspended, res, ok := s.authSession(ctx, rc, start)
		if !ok {
			return res, Principal{}, false
		}
		p = sp
		// The dashboard's own routes still answer a suspended workspace's
		// members (to show them why); everything else refuses it.
		if suspended && rt.Credential != CredSession {
			return Fail(403, "TEAM_SUSPENDED", "This workspace is suspended"), p, false
		}
	} else if rt.Credential != CredNone {
		id, res, ok := s.authenticate(rc, rt, start)
		if !ok {
			return res, Principal{}, false
		}
		p = Principal{
			Workspace: id.Workspace, WorkspaceName: id.WorkspaceName, KeyID: id.KeyID, Kind: id.Kind,
			Scopes: id.Scopes, Plan: id.Plan, ContactLimit: id.ContactLimit, Domains: id.Domains,
			MemberID: id.MemberID, AppID: id.AppID, AppName: id.AppName,
		}
		mult = id.RateMultiplier
		if rt.Scope != "" && id.Kind != auth.KindTrackingToken && len(id.Scopes) > 0 && !contains(id.Scopes, rt.Scope) {
			e := ErrorBody{Error: "This API key lacks the scope " + rt.Scope + " that this endpoint requires", Code: "insufficient_scope"}
			if rt.ScopeInError {
				e.RequiredScope = rt.Scope
			}
			return Result{Status: 403, Body: e}, p, false
		}
		if id.Suspended {
			return Fail(403, "TEAM_SUSPENDED", "This workspace is suspended"), p, false
		}
		if rt.Limit > 0 && s.limiter != nil {
			allowed, err := s.limiter.AllowAt(ctx, start, p.Workspace, rt.limitName, int64(rt.Limit)*mult)
			if err != nil {
				s.log.Error("rate limit unavailable", "route", rt.Path, "err", err)
				return unavailable(), p, false
			}
			if !allowed {
				return Result{Status: 429, Body: rateLimited{Error: "Rate limit exceeded: " + strconv.FormatInt(int64(rt.Limit)*mult, 10) + " requests per minute for this endpoint"}}, p, false
			}
		}
	}
	if len(body) > 0 && (rc.IsPost() || rc.IsPut() || rc.IsPatch()) {
		if res, ok := decodeBody(rc, rt.bodyCap); !ok {
			return res, p, false
		}
		if !rt.RawBody {
			res, ok := checkJSON(rc.Request.Header.ContentType(), rc.PostBody(), rt.CORS, compact)
			if !ok {
				return res, p, false
			}
		}
	}
	return Result{}, p, true
}

// runHandler calls the route's handler, turning a panic into a 500.
func (s *Server) runHandler(rt *route, c *Call) (res Result) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("handler panic", "route", rt.Method+" "+rt.Path, "panic", fmt.Sprint(v))
			res = Fail(500, "internal_error", "Internal error")
		}
	}()
	res = rt.Handle(c)
	if res.Status == 0 {
		res.Status = 200
	}
	return res
}

// authenticate resolves the bearer credential. ok false means res is the
// answer (401 or 503), never logged.
func (s *Server) authenticate(rc *fasthttp.RequestCtx, rt *route, start time.Time) (*auth.Identity, Result, bool) {
	tok, ok := bearer(rc.Request.Header.Peek("Authorization"))
	if !ok {
		return nil, unauthorized("Missing API key: send the header Authorization: Bearer <API_KEY>"), false
	}
	id, err := s.auth.AuthenticateAt(s.base, tok, start)
	switch {
	case err == nil:
	case errors.Is(err, auth.ErrExpired):
		return nil, unauthorized("API key has expired"), false
	case errors.Is(err, auth.ErrMalformed), errors.Is(err, auth.ErrUnknown):
		return nil, unauthorized("Invalid API key"), false
	default:
		s.log.Error("credential lookup failed", "err", err)
		return nil, unavailable(), false
	}
	if id.Kind == auth.KindTrackingToken && rt.Credential != CredKeyOrTracking {
		return nil, unauthorized("A tracking token is accepted only by POST /public/events; use an API key"), false
	}
	return id, Result{}, true
}
