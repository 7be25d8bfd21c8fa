package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/valyala/fasthttp"

	"sendstream/schemas"
)

// The checks of a request body's form, before any handler reads it: its
// Content-Encoding (decodeBody), then on JSON routes its Content-Type and
// syntax (checkJSON, which also applies the text rule of text.go).
//
// Request bodies may be sent compressed with Content-Encoding: gzip (or its
// alias x-gzip), as most HTTP clients can do; identity (or no header) is a
// plain body. Every other encoding (deflate, br, zstd, a list of several)
// answers 415 unsupported_media_type naming the accepted ones, rather than
// being read as if plain. A gzip body is decoded before any other check of
// its content, bounded by the route's body cap: a body that would decode
// to more answers 413 PAYLOAD_TOO_LARGE after reading at most cap+1 bytes
// of output, so a small "gzip bomb" costs no more memory than a plain body
// at the cap. The decoded body replaces the request body: handlers and the
// request log see the JSON the client meant.

// decodeBody applies the request's Content-Encoding to its body in place.
// ok false means res is the answer (415, 413 or 400).
func decodeBody(rc *fasthttp.RequestCtx, bodyCap int) (res Result, ok bool) {
	ce := bytes.TrimSpace(rc.Request.Header.Peek(fasthttp.HeaderContentEncoding))
	switch {
	case len(ce) == 0 || bytes.EqualFold(ce, []byte("identity")):
		return Result{}, true
	case bytes.EqualFold(ce, []byte("gzip")) || bytes.EqualFold(ce, []byte("x-gzip")):
	default:
		return Fail(415, "unsupported_media_type",
			"Content-Encoding "+printable(string(ce))+" is not supported: send the body uncompressed (identity) or with Content-Encoding: gzip"), false
	}
	plain, err := gunzipBounded(rc.PostBody(), bodyCap)
	switch {
	case errors.Is(err, errDecodedTooLarge):
		return Fail(413, "PAYLOAD_TOO_LARGE", "Request body exceeds the limit of "+sizeString(bodyCap)+
			" for this endpoint once decoded (Content-Encoding: gzip); nothing was processed"), false
	case err != nil:
		return Fail(400, "invalid_encoding", "Request body is not valid gzip data (Content-Encoding: gzip): "+err.Error()), false
	}
	rc.Request.SetBodyRaw(plain)
	rc.Request.Header.Del(fasthttp.HeaderContentEncoding)
	return Result{}, true
}

var errDecodedTooLarge = errors.New("decoded body over the cap")

// gunzipBounded decodes the gzip data in (one or more members) and fails
// with errDecodedTooLarge as soon as the output would exceed limit bytes.
// The output buffer grows by doubling but never past limit+1 bytes.
func gunzipBounded(in []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(in))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	size := min(max(4*len(in), 4<<10), limit+1)
	out := make([]byte, 0, size)
	for {
		if len(out) == cap(out) {
			if len(out) > limit {
				return nil, errDecodedTooLarge
			}
			grown := make([]byte, len(out), min(2*cap(out), limit+1))
			copy(grown, out)
			out = grown
		}
		n, err := zr.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if len(out) > limit {
			return nil, errDecodedTooLarge
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// checkJSON enforces the content type, the syntax and the text rule
// (checkBodyText) of a JSON body, and reports in *compact whether the body
// has no whitespace outside strings.
// Accepted types: application/json and application/*+json (any
// parameters), no Content-Type at all, and on CORS routes text/plain.
func checkJSON(ct, body []byte, cors bool, compact *bool) (Result, bool) {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = bytes.TrimSpace(ct)
	okType := len(ct) == 0 || bytes.EqualFold(ct, []byte("application/json")) ||
		(len(ct) > 17 && bytes.EqualFold(ct[:12], []byte("application/")) && bytes.EqualFold(ct[len(ct)-5:], []byte("+json"))) ||
		(cors && bytes.EqualFold(ct, []byte("text/plain")))
	if !okType {
		return Fail(415, "unsupported_media_type", "Content-Type must be application/json, not "+string(ct)), false
	}
	valid, tight, badEscape := schemas.CheckRequestJSON(body)
	if !valid {
		return Fail(400, "invalid_json", "Request body is not valid JSON: "+jsonSyntaxError(body)), false
	}
	if res, ok := checkBodyText(body, badEscape); !ok {
		return res, false
	}
	*compact = tight
	return Result{}, true
}

func jsonSyntaxError(body []byte) string {
	var v any
	err := json.Unmarshal(body, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error() + " at byte " + strconv.FormatInt(se.Offset, 10)
	}
	if err != nil {
		return err.Error()
	}
	return "unexpected data"
}
