package ingest

import (
	"bytes"
	"strings"

	"github.com/valyala/fasthttp"
)

// Hardening headers. Every answer carries X-Content-Type-Options: nosniff;
// answers under /api/ carry Cache-Control: no-store (they hold workspace
// data and are never the same twice). HTML pages (the hosted sign-up form,
// the confirmation and unsubscribe pages) get a Content-Security-Policy
// that allows nothing but their own inline styles and form posts to this
// site, may not be framed (frame-ancestors 'none', X-Frame-Options: DENY),
// send no Referer (their URLs carry signed tokens) and are not cached.
// A handler's own Result.Headers win over these defaults (track.js is
// cached publicly and read cross-origin).

var (
	hNosniff        = []byte("X-Content-Type-Options")
	vNosniff        = []byte("nosniff")
	hCacheControl   = []byte("Cache-Control")
	vNoStore        = []byte("no-store")
	hCSP            = []byte("Content-Security-Policy")
	vCSP            = []byte("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hFrameOptions   = []byte("X-Frame-Options")
	vDeny           = []byte("DENY")
	hReferrerPolicy = []byte("Referrer-Policy")
	vNoReferrer     = []byte("no-referrer")
	apiPrefix       = []byte("/api/")
)

// baseHeaders sets the headers every answer of path carries; it runs
// before routing, so 404, 405 and preflight answers have them too.
func baseHeaders(h *fasthttp.ResponseHeader, path []byte) {
	h.SetCanonical(hNosniff, vNosniff)
	if bytes.HasPrefix(path, apiPrefix) {
		h.SetCanonical(hCacheControl, vNoStore)
	}
}

// pageHeaders sets the headers of an HTML answer (content type ct).
func pageHeaders(h *fasthttp.ResponseHeader, ct string) {
	const html = "text/html"
	if len(ct) < len(html) || !strings.EqualFold(ct[:len(html)], html) {
		return
	}
	h.SetCanonical(hCSP, vCSP)
	h.SetCanonical(hFrameOptions, vDeny)
	h.SetCanonical(hReferrerPolicy, vNoReferrer)
	h.SetCanonical(hCacheControl, vNoStore)
}
