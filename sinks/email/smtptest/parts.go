package smtptest

import (
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"strings"
)

// Part is one leaf part of a MIME body, decoded.
type Part struct {
	Type string // media type, e.g. "text/html"
	Text string // the body with its transfer encoding undone
}

// Parts returns the leaf parts of a body of content type ctype and
// transfer encoding cte (a parsed message's headers and body), in order,
// nested multiparts flattened and quoted-printable or base64 undone.
func Parts(ctype, cte string, body io.Reader) ([]Part, error) {
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		return nil, fmt.Errorf("content type %q: %w", ctype, err)
	}
	if strings.HasPrefix(mt, "multipart/") {
		var out []Part
		r := multipart.NewReader(body, params["boundary"])
		for {
			p, err := r.NextRawPart() // the transfer encoding is undone below
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return nil, fmt.Errorf("multipart: %w", err)
			}
			sub, err := Parts(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		}
	}
	switch strings.ToLower(cte) {
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("%s part: %w", mt, err)
	}
	return []Part{{Type: mt, Text: string(b)}}, nil
}
