// Package ingest is the synchronous HTTP edge: it authenticates, applies
// limits and body caps, hands each call to a route's handler, publishes what
// the handler returns together with the request-log record (acks=all), and only
// then answers. Handlers see Call and return Result: no HTTP library types.
package ingest

import (
	"context"
	"encoding/json"

	"sendstream/schemas"
)

// Credential says which kinds of credential a route accepts.
type Credential int

const (
	// CredKey accepts a workspace API key or an OAuth access token.
	CredKey Credential = iota
	// CredKeyOrTracking also accepts a tracking token (POST /public/events).
	CredKeyOrTracking
	// CredNone: public, unauthenticated (forms, confirmation pages, track.js).
	CredNone
	// CredSession accepts only a signed-in member's session cookie (the
	// dashboard's internal /api/* routes); an API key is refused with 401
	// (spec 1, fact 3). Unsafe methods are checked for cross-origin
	// requests (see Route.SameOrigin). Deps.Sessions resolves the cookie.
	CredSession
	// CredKeyOrSession accepts an API key (or OAuth token), or, when no
	// Authorization header is sent, a session cookie (GET
	// /v1/openapi.json, spec 1 fact 4).
	CredKeyOrSession
)

// KindSession is Principal.Kind of a call authenticated by a session.
const KindSession = "session"

// SessionCookie is the name of the cookie that carries a session token.
const SessionCookie = "ss_session"

// Principal is who is calling, resolved by authentication. Its slices are
// shared with the credential cache: read them, never modify them.
type Principal struct {
	Workspace     string   // workspace id
	WorkspaceName string   // workspace display name
	KeyID         string   // id of the API key, tracking token or OAuth token
	Kind          string   // "api_key", "tracking_token" or "oauth"
	Scopes        []string // empty means full access (API keys only)
	Plan          string   // free, pro or enterprise
	ContactLimit  int64    // 0 means unlimited
	Domains       []string // tracking tokens: allowed domains; empty allows all
	// Sessions (Kind KindSession): the member, the login's email, the
	// role and the member's named permissions (package members says what
	// they allow). KeyID is the session's id. OAuth access tokens set
	// MemberID (the member the token acts as) and AppID/AppName.
	MemberID    string
	AppID       string
	AppName     string
	Email       string
	Role        string
	Permissions []string
}

// Call is one request as a handler sees it.
type Call struct {
	Ctx       context.Context
	Principal Principal // zero for CredNone routes
	Method    string
	Path      string
	Params    map[string]string // path parameters, e.g. {"id": "..."}
	Body      []byte            // raw body; valid only during the handler
	// BodyCompact reports that Body is valid JSON with no whitespace
	// outside strings (the server checked it), so any member of it can be
	// copied into an envelope payload as compact JSON.
	BodyCompact bool
	// Query returns a query parameter, percent-decoded ("" when absent).
	Query func(name string) string
	// HasQuery reports whether the query string names the parameter at all
	// (even empty, as in ?limit=): a parameter that is present must be
	// valid, never silently replaced by its default.
	HasQuery  func(name string) bool
	Header    func(name string) string
	RequestID string // the id minted for this call (also the request-log id)
	RemoteIP  string // the connection's peer address (sign-in throttling)
}

// Message is one envelope to publish to a topic before answering.
type Message struct {
	Topic string
	Env   schemas.Envelope
}

// Result is a handler's answer: the status and JSON body to send, what to
// publish first (acks=all), and what the call produced for the request log.
type Result struct {
	Status int
	Body   any    // encoded as JSON unless Raw is set
	Raw    []byte // a pre-encoded body, sent as is
	// RawJSON promises that Raw is compact JSON, as encoding/json writes
	// it: the request log then carries it without a check.
	RawJSON     bool
	ContentType string            // default application/json
	Headers     map[string]string // extra response headers
	Publish     []Message
	Produced    schemas.Produced // ids and recipient for the request log
	// Stored says the handler already committed a change (in Postgres)
	// that Publish announces. If publishing then fails, the 503 says the
	// change was kept and only its announcement failed, never that
	// nothing was done.
	Stored bool
	// Outboxed says every envelope of Publish was also written to a
	// transactional outbox with the change (contacts): if publishing
	// fails, the 503 says the events will still be delivered (by the
	// relay, under the same ids) rather than that they may be missing.
	Outboxed bool
	// Unauthenticated says the call failed a credential the handler checks
	// itself (the journey trigger's X-Trigger-Key): like a 401 of the
	// server's own authentication, it is not recorded in the request log
	// (spec 5.1 rule 6).
	Unauthenticated bool
	// Published, when set, is called once every envelope of Publish was
	// acknowledged by the broker, before the answer is written (contacts
	// delete their outbox rows with it). Not called when publishing failed.
	Published func()
}

// Route declares one endpoint. Path uses {name} for parameters and is
// relative to the site root (e.g. "/api/v1/contacts").
type Route struct {
	Method     string
	Path       string
	Credential Credential
	Scope      string // required scope; "" means any credential of the right kind
	// ScopeInError adds "requiredScope" to 403 insufficient_scope (spec 5.1
	// rule 4: /v1 routes except transactional ones).
	ScopeInError bool
	Limit        int    // requests per workspace per minute; 0 means none
	LimitName    string // counter name; defaults to Method+" "+Path
	BodyCap      int    // bytes; 0 means the surface default
	Logged       bool   // recorded in the request log when authenticated
	// CORS answers browsers: Access-Control-Allow-Origin: * on every answer of
	// this path, a working OPTIONS preflight, and text/plain bodies accepted as
	// JSON (sendBeacon and simple requests avoid a preflight that way).
	CORS bool
	// RawBody skips the server's JSON checks (415 unsupported_media_type,
	// 400 invalid_json): the handler reads forms or other bodies itself.
	RawBody bool
	// SameOrigin refuses cross-origin requests of unsafe methods with 403,
	// as net/http.CrossOriginProtection does (Sec-Fetch-Site, else Origin
	// against Host): the CSRF protection of browser forms (POST /login).
	// Always on for CredSession routes and session-authenticated calls.
	SameOrigin bool
	Handle     func(c *Call) Result
}

// ErrorBody is the spec 7.1 error format.
type ErrorBody struct {
	Error         string   `json:"error"`
	Code          string   `json:"code,omitempty"`
	Fields        []string `json:"fields,omitempty"`
	RequiredScope string   `json:"requiredScope,omitempty"`
	Missing       []string `json:"missing,omitempty"`
}

// Fail returns an error Result in the spec 7.1 format.
func Fail(status int, code, msg string, fields ...string) Result {
	return Result{Status: status, Body: ErrorBody{Error: msg, Code: code, Fields: fields}}
}

// OK returns a Result with a JSON body.
func OK(status int, body any) Result { return Result{Status: status, Body: body} }

// DecodeJSON decodes a request body strictly enough for validation: it must be
// one JSON object. The error names what was wrong, for a 400.
func DecodeJSON(body []byte, v any) error {
	if len(body) == 0 {
		return errEmptyBody
	}
	return json.Unmarshal(body, v)
}

type constErr string

func (e constErr) Error() string { return string(e) }

const errEmptyBody = constErr("request body is empty; send a JSON object")
