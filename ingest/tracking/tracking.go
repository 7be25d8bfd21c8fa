// Package tracking serves website tracking (spec 4.7): the browser script
// at {site_url}/track.js and the anonymous page-view beacon it sends to
// POST /api/track/pageview (internal, not public API), which feeds website
// analytics through the page-view topic. The script records events and
// goals through POST /api/public/events (package events).
package tracking

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/events"
	"sendstream/ingest/ratelimit"
	"sendstream/schemas"
)

//go:embed track.js
var trackSource []byte

// Script is track.js as served: the source with comments and indentation
// removed (see Minify).
var Script = Minify(trackSource)

// Limits of the page-view beacon.
const (
	// BeaconCap is the largest beacon body accepted.
	BeaconCap = 8 << 10
	// BeaconLimit is the page views per workspace per minute (multiplied by
	// the workspace's rate multiplier), above which beacons are dropped
	// with 429.
	BeaconLimit = 6000
	// maxText caps the title, user agent, host and path kept.
	maxText = 512
)

// Authenticator resolves a presented credential (auth.Cache implements it).
type Authenticator interface {
	Authenticate(ctx context.Context, token []byte) (*auth.Identity, error)
}

// Limiter counts calls per workspace and minute (ratelimit.Limiter).
type Limiter interface {
	Allow(ctx context.Context, workspace, endpoint string, limit int64) (bool, error)
}

var _ Limiter = (*ratelimit.Limiter)(nil)

// Deps are what the routes need.
type Deps struct {
	// Auth resolves the tracking token a beacon carries in its body
	// (sendBeacon cannot send headers); required.
	Auth Authenticator
	// Limiter enforces BeaconLimit; nil means no limit.
	Limiter Limiter
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Routes returns GET /track.js and POST /api/track/pageview.
func Routes(d Deps) []ingest.Route {
	if d.Auth == nil {
		panic("tracking: Deps.Auth is required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	h := &handlers{deps: d}
	return []ingest.Route{
		{Method: "GET", Path: "/track.js", Credential: ingest.CredNone, Handle: serveScript},
		{Method: "POST", Path: "/api/track/pageview", Credential: ingest.CredNone, CORS: true, BodyCap: BeaconCap, Handle: h.pageview},
	}
}

var scriptHeaders = map[string]string{
	"Cache-Control":               "public, max-age=300",
	"Access-Control-Allow-Origin": "*",
	"X-Content-Type-Options":      "nosniff",
}

func serveScript(*ingest.Call) ingest.Result {
	return ingest.Result{Status: 200, Raw: Script, ContentType: "text/javascript; charset=utf-8", Headers: scriptHeaders}
}

type handlers struct{ deps Deps }

// beacon is the body track.js sends: s the tracking token, u the page URL,
// r the referrer, t the title, w the screen width.
type beacon struct {
	S string `json:"s"`
	U string `json:"u"`
	R string `json:"r"`
	T string `json:"t"`
	W int    `json:"w"`
}

// pageview records one anonymous page view. Answers: 204 recorded, 400 bad
// beacon, 401 bad token, 403 origin not allowed, 429 over the limit, 503
// store or queue unavailable.
func (h *handlers) pageview(c *ingest.Call) ingest.Result {
	var b beacon
	if err := ingest.DecodeJSON(c.Body, &b); err != nil {
		return ingest.Fail(400, "validation_error", "The beacon must be a JSON object", "body")
	}
	id, err := h.deps.Auth.Authenticate(c.Ctx, []byte(b.S))
	switch {
	case err == nil && id.Kind == auth.KindTrackingToken:
	case err == nil, errors.Is(err, auth.ErrMalformed), errors.Is(err, auth.ErrUnknown), errors.Is(err, auth.ErrExpired):
		return ingest.Fail(401, "unauthorized", "Invalid tracking token")
	default:
		return ingest.Fail(503, "unavailable", "The service is temporarily unavailable")
	}
	if id.Suspended {
		return ingest.Fail(403, "TEAM_SUSPENDED", "This workspace is suspended")
	}
	if origin := c.Header("Origin"); !events.OriginAllowed(origin, id.Domains) {
		return ingest.Fail(403, "origin_not_allowed", "The tracking token does not allow the origin "+origin)
	}
	u, err := url.Parse(b.U)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ingest.Fail(400, "validation_error", "u must be the page's http(s) URL", "u")
	}
	if h.deps.Limiter != nil {
		ok, err := h.deps.Limiter.Allow(c.Ctx, id.Workspace, "POST /api/track/pageview", BeaconLimit*max(id.RateMultiplier, 1))
		if err != nil {
			return ingest.Fail(503, "unavailable", "The service is temporarily unavailable")
		}
		if !ok {
			return ingest.Result{Status: 429, Body: map[string]string{"error": "Rate limit exceeded"}}
		}
	}
	now := h.deps.Now().UTC()
	q := u.Query()
	p := schemas.PageViewPayload{
		Host: capText(strings.ToLower(u.Hostname())), Path: capText(orSlash(u.EscapedPath())), Title: capText(b.T),
		UTMSource: capText(q.Get("utm_source")), UTMMedium: capText(q.Get("utm_medium")), UTMCampaign: capText(q.Get("utm_campaign")),
		UserAgent: capText(c.Header("User-Agent")), OccurredAt: now,
	}
	if b.W > 0 && b.W < 65536 {
		p.ScreenWidth = b.W
	}
	if r, err := url.Parse(b.R); err == nil && r.Host != "" {
		p.ReferrerHost = capText(strings.ToLower(r.Hostname()))
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return ingest.Fail(500, "internal_error", "Internal error")
	}
	env := schemas.Envelope{
		ID: schemas.NewID(), Workspace: id.Workspace, Type: schemas.TypePageViewed, Key: id.Workspace,
		OccurredAt: now, Payload: payload,
	}
	return ingest.Result{Status: 204, Publish: []ingest.Message{{Topic: schemas.TopicPageViews, Env: env}}}
}

func orSlash(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// capText cuts s to maxText bytes on a rune boundary.
func capText(s string) string {
	if len(s) <= maxText {
		return s
	}
	s = s[:maxText]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// Minify removes what a browser does not need from JavaScript written in
// this package's style: /* */ comment blocks and // comment lines that
// start a line, leading indentation, and empty lines. It does not parse
// JavaScript: the source must not start a line inside a string or template
// with those characters.
func Minify(src []byte) []byte {
	var out bytes.Buffer
	inBlock := false
	for _, line := range bytes.Split(src, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if inBlock {
			if i := bytes.Index(t, []byte("*/")); i >= 0 {
				inBlock = false
				t = bytes.TrimSpace(t[i+2:])
			} else {
				continue
			}
		}
		if bytes.HasPrefix(t, []byte("/*")) {
			if i := bytes.Index(t, []byte("*/")); i >= 0 {
				t = bytes.TrimSpace(t[i+2:])
			} else {
				inBlock = true
				continue
			}
		}
		if len(t) == 0 || bytes.HasPrefix(t, []byte("//")) {
			continue
		}
		out.Write(t)
		out.WriteByte('\n')
	}
	return out.Bytes()
}
