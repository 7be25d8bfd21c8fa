package ingest

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"
)

// authSession resolves the session cookie of a CredSession or
// CredKeyOrSession call. ok false means res is the answer: 401 without a
// valid session, or when a CredSession route is sent an API key (spec 1,
// fact 3: internal routes do not accept API keys); 503 when the lookup
// failed.
func (s *Server) authSession(ctx context.Context, rc *fasthttp.RequestCtx, start time.Time) (p Principal, suspended bool, res Result, ok bool) {
	if len(rc.Request.Header.Peek("Authorization")) > 0 {
		return p, false, Fail(401, "unauthorized", "This internal route takes a signed-in session, not an API key; only the documented endpoints accept API keys"), false
	}
	tok := rc.Request.Header.Cookie(SessionCookie)
	if len(tok) == 0 || s.deps.Sessions == nil {
		return p, false, Fail(401, "unauthorized", "Not signed in: sign in at /login"), false
	}
	p, suspended, err := s.deps.Sessions.ResolveSession(ctx, string(tok), start)
	switch {
	case err == nil:
		return p, suspended, Result{}, true
	case errors.Is(err, ErrNoSession):
		return p, false, Fail(401, "unauthorized", "The session has ended: sign in again at /login"), false
	}
	s.log.Error("session lookup failed", "err", err)
	return p, false, unavailable(), false
}

// sameOrigin applies net/http.CrossOriginProtection to a fasthttp request:
// unsafe methods from another origin (Sec-Fetch-Site, or else Origin
// compared with Host) get 403; safe methods and requests without either
// header (not from a browser) pass. The site URL's origin is trusted too,
// for a proxy that rewrites Host.
func (s *Server) sameOrigin(rc *fasthttp.RequestCtx) (Result, bool) {
	if rc.IsGet() || rc.IsHead() || rc.IsOptions() {
		return Result{}, true
	}
	req := &http.Request{
		Method: string(rc.Method()),
		Host:   string(rc.Host()),
		URL:    &url.URL{Path: string(rc.Path())},
		Header: make(http.Header, 2),
	}
	if v := rc.Request.Header.Peek("Sec-Fetch-Site"); len(v) > 0 {
		req.Header.Set("Sec-Fetch-Site", string(v))
	}
	if v := rc.Request.Header.Peek("Origin"); len(v) > 0 {
		req.Header.Set("Origin", string(v))
	}
	if err := s.csrf.Check(req); err != nil {
		return Fail(403, "cross_origin_request", "Cross-origin request refused: send forms from the site itself"), false
	}
	return Result{}, true
}

// newCrossOrigin returns the protection sameOrigin applies, trusting the
// site URL's origin.
func newCrossOrigin(siteURL string) (*http.CrossOriginProtection, error) {
	c := http.NewCrossOriginProtection()
	u, err := url.Parse(siteURL)
	if err != nil {
		return nil, err
	}
	if err := c.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
		return nil, err
	}
	return c, nil
}

// SessionToken returns the session cookie's value from a Cookie header
// ("" without one): what the pages that resolve sessions themselves
// (sign-in, the dashboard, the consent page) read.
func SessionToken(cookieHeader string) string {
	cks, err := http.ParseCookie(cookieHeader)
	if err != nil {
		return ""
	}
	for _, ck := range cks {
		if ck.Name == SessionCookie {
			return ck.Value
		}
	}
	return ""
}
