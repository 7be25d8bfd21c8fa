package ingest

// The edge's small answers: the bearer header, the error bodies of 401,
// 413, 429 and 503, requests fasthttp could not read, CORS preflights, and
// fasthttp's logger.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/valyala/fasthttp"
)

// bearer extracts the credential of an "Authorization: Bearer X" header.
func bearer(h []byte) ([]byte, bool) {
	const p = "bearer "
	if len(h) <= len(p) || !bytes.EqualFold(h[:len(p)], []byte(p)) {
		return nil, false
	}
	tok := bytes.TrimSpace(h[len(p):])
	return tok, len(tok) > 0
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// rateLimited is the 429 body: only "error" (spec 7.1).
type rateLimited struct {
	Error string `json:"error"`
}

func unauthorized(msg string) Result {
	r := Fail(401, "unauthorized", msg)
	r.Headers = map[string]string{"WWW-Authenticate": `Bearer realm="sendstream"`}
	return r
}

func unavailable() Result {
	return Fail(503, "unavailable", "The service is temporarily unavailable; nothing was done, retry later")
}

func tooLarge(limit int) Result {
	return Fail(413, "PAYLOAD_TOO_LARGE", "Request body exceeds the limit of "+sizeString(limit)+" for this endpoint; nothing was processed")
}

func sizeString(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KB"
	}
	return strconv.Itoa(n) + " bytes"
}

// handleReadError answers requests fasthttp could not read, in spec 7.1
// format: bodies over MaxRequestBodySize get 413, a request line and
// headers over the read buffer 431, a stalled read 408, and anything else
// (a broken request line, header or chunked body) 400 malformed_request.
func (s *Server) handleReadError(rc *fasthttp.RequestCtx, err error) {
	baseHeaders(&rc.Response.Header, nil)
	var small *fasthttp.ErrSmallBuffer
	if errors.As(err, &small) {
		writeError(rc, 431, ErrorBody{Error: "Request line and headers exceed 16 KB", Code: "headers_too_large"})
		rc.SetConnectionClose()
		return
	}
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		writeError(rc, 413, ErrorBody{Error: "Request body exceeds the limit of " + sizeString(CapV1) + "; nothing was processed", Code: "PAYLOAD_TOO_LARGE"})
		rc.SetConnectionClose()
		return
	}
	var to interface{ Timeout() bool }
	if errors.As(err, &to) && to.Timeout() {
		writeError(rc, 408, ErrorBody{Error: "Timed out reading the request", Code: "request_timeout"})
		return
	}
	writeError(rc, 400, ErrorBody{Error: "Malformed HTTP request: the request line, a header or the chunked body could not be read", Code: "malformed_request"})
}

// preflight answers a CORS preflight.
func (s *Server) preflight(rc *fasthttp.RequestCtx, n *node) {
	h := &rc.Response.Header
	h.Set("Access-Control-Allow-Methods", n.allow)
	if req := rc.Request.Header.Peek("Access-Control-Request-Headers"); len(req) > 0 {
		h.SetBytesV("Access-Control-Allow-Headers", req)
	} else {
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
	}
	h.Set("Access-Control-Max-Age", "86400")
	h.Set("Vary", "Access-Control-Request-Headers")
	rc.SetStatusCode(204)
}

func writeError(rc *fasthttp.RequestCtx, status int, e ErrorBody) {
	b, _ := json.Marshal(e)
	rc.SetStatusCode(status)
	rc.SetContentType("application/json")
	rc.SetBody(b)
}

type fastLogger struct{ l *slog.Logger }

func (f fastLogger) Printf(format string, args ...any) {
	f.l.Debug("fasthttp: " + fmt.Sprintf(format, args...))
}
