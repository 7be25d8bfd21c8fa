package transactional

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/buger/jsonparser"

	"sendstream/ingest/contacts"
	"sendstream/schemas"
	"sendstream/sinks/email/render"
)

// Limits of a send: those of spec 8.2, and the two the spec does not show
// that something outside the request imposes (each documented with its
// reason in the OpenAPI fragment). subject, templateId, language,
// sendPolicy, attachment file names and content types and the contact's
// text fields have no length of their own: an unknown template or policy
// answers 404 or SEND_POLICY_NOT_FOUND as the spec says, the mail builder
// folds long headers, and the contact's values are bounded by
// contacts.MaxContactValues.
const (
	MaxDataBytes       = 256 << 10 // data, as sent (spec 8.2)
	MaxDataDepth       = 32        // nesting levels of data (spec 8.2)
	MaxAttachments     = 20        // spec 8.2
	MaxAttachmentBytes = 3 << 20   // decoded, each (spec 8.2)
	MaxAttachmentTotal = 10 << 20  // decoded, all (spec 8.2)
	MaxCopies          = 10        // cc and bcc each (spec 8.2)
	// MaxExternalID: a message is looked up by ext:<externalId> in a URL
	// path (spec 2.4), which must fit the request line; 255 characters
	// (up to 3 KB percent-encoded) as Stripe's and Resend's idempotency keys.
	MaxExternalID = 255
	// MaxContentID bounds an attachment's contentId: it becomes the
	// Content-ID header, one word that cannot be folded, and "Content-ID:
	// <…>" must fit a header line of 998 octets (RFC 5322 2.1.1). A
	// filename and contentType of any length are folded (RFC 2231).
	MaxContentID = 998 - len("Content-ID: <>")
)

// codeValidation is the code of 400 answers naming failing fields (the
// same as the contacts endpoints').
const codeValidation = "validation_error"

// sendRequest is a decoded, validated body of send or validate.
type sendRequest struct {
	To          string
	Subject     string
	TemplateID  string
	HTMLContent string
	HasHTML     bool
	// htmlJSON is HTMLContent encoded as a JSON string, when the source
	// cache has it (the send envelope copies it).
	htmlJSON []byte
	DataRaw  json.RawMessage // the data object as sent; nil when absent
	// DataCompact: DataRaw has no whitespace outside strings (the server
	// checked the whole body and found none: ingest.Call.BodyCompact).
	DataCompact bool
	ExternalID  string
	Strict      bool
	Contact     *contactInput
	Language    string
	SendPolicy  string
	Attachments []schemas.Attachment
	Cc, Bcc     []string
	ReplyTo     string
	FromEmail   string
}

// contactInput is the `contact` object of a send.
type contactInput struct {
	FirstName, Country, Language *string
	CustomFields                 map[string]json.RawMessage
}

// fieldErrs collects failing fields and their messages.
type fieldErrs struct {
	fields []string
	msgs   []string
}

func (e *fieldErrs) add(field, msg string) {
	e.fields = append(e.fields, field)
	e.msgs = append(e.msgs, field+" "+msg)
}

func (e *fieldErrs) empty() bool { return len(e.fields) == 0 }

func (e *fieldErrs) message() string {
	return "Invalid input: " + strings.Join(e.msgs, "; ")
}

// jv is one JSON value of an object: its raw bytes (a string's without the
// quotes, still escaped) and its type.
type jv struct {
	raw []byte
	t   jsonparser.ValueType
}

// members returns the members of a JSON object in one pass over it (the
// last of duplicated keys wins, as with encoding/json). ok is false when
// data is not an object.
func members(data []byte) (map[string]jv, bool) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, false
	}
	m := make(map[string]jv, 16)
	err := jsonparser.ObjectEach(data, func(k, v []byte, t jsonparser.ValueType, _ int) error {
		m[string(k)] = jv{raw: v, t: t}
		return nil
	})
	return m, err == nil
}

// present reports a member that is there and not null.
func present(m map[string]jv, name string) (jv, bool) {
	v, ok := m[name]
	return v, ok && v.t != jsonparser.Null
}

// parseSend decodes and checks a send-shaped body: one pass over the object
// (the server already checked the JSON syntax), then each member. errs lists
// every failing field; the request is usable only when errs is empty. The
// HTML of workspace ws goes through sources (nil: decoded every time).
func parseSend(body []byte, sources *schemas.SourceCache, ws string) (*sendRequest, *fieldErrs) {
	errs := &fieldErrs{}
	m, ok := members(body)
	if !ok {
		errs.add("body", "must be a JSON object")
		return nil, errs
	}
	r := &sendRequest{}
	r.To = emailField(m, "to", true, errs)
	r.Subject = str(m, "subject", noLimit, errs)
	r.TemplateID = str(m, "templateId", noLimit, errs)
	if v, ok := present(m, "htmlContent"); ok {
		if v.t != jsonparser.String {
			errs.add("htmlContent", "must be a string")
		} else if s, enc, err := sources.Get(ws, v.raw, jsonparser.ParseString); err != nil {
			errs.add("htmlContent", "must be a string")
		} else {
			r.HTMLContent, r.htmlJSON, r.HasHTML = s, enc, true
		}
	}
	if !r.HasHTML && r.TemplateID == "" {
		errs.add("templateId", "or htmlContent is required")
	}
	if r.HasHTML && strings.TrimSpace(r.Subject) == "" && !hasField(errs, "subject") {
		errs.add("subject", "is required")
	}
	if v, ok := present(m, "data"); ok {
		switch {
		case v.t != jsonparser.Object:
			errs.add("data", "must be an object")
		case len(v.raw) > MaxDataBytes:
			errs.add("data", fmt.Sprintf("must be at most %d KB", MaxDataBytes>>10))
		case render.DataDepth(v.raw) > MaxDataDepth:
			errs.add("data", fmt.Sprintf("must be nested at most %d levels deep", MaxDataDepth))
		default:
			// Checked JSON (the server validates the body); decoded only
			// where it is rendered.
			r.DataRaw = append(json.RawMessage(nil), v.raw...)
		}
	}
	r.ExternalID = str(m, "externalId", MaxExternalID, errs)
	if _, ok := present(m, "externalId"); ok && r.ExternalID == "" && !hasField(errs, "externalId") {
		errs.add("externalId", "must not be empty")
	}
	if v, ok := present(m, "strict"); ok {
		b, err := jsonparser.ParseBoolean(v.raw)
		if v.t != jsonparser.Boolean || err != nil {
			errs.add("strict", "must be a boolean")
		}
		r.Strict = b
	}
	r.Language = str(m, "language", noLimit, errs)
	r.SendPolicy = str(m, "sendPolicy", noLimit, errs)
	r.ReplyTo = emailField(m, "replyTo", false, errs)
	r.FromEmail = emailField(m, "fromEmail", false, errs)
	r.Cc = addresses(m, "cc", errs)
	r.Bcc = addresses(m, "bcc", errs)
	r.Contact = contactField(m, r.To, errs)
	r.Attachments = attachments(m, errs)
	return r, errs
}

func hasField(e *fieldErrs, f string) bool {
	for _, x := range e.fields {
		if x == f {
			return true
		}
	}
	return false
}

// noLimit is str's max for a string without a length rule.
const noLimit = math.MaxInt

// str reads an optional string of at most max characters (the document's
// maxLength, which counts characters, not UTF-8 bytes).
func str(m map[string]jv, name string, max int, errs *fieldErrs) string {
	v, ok := present(m, name)
	if !ok {
		return ""
	}
	if v.t != jsonparser.String {
		errs.add(name, "must be a string")
		return ""
	}
	s, err := jsonparser.ParseString(v.raw)
	if err != nil {
		errs.add(name, "must be a string")
		return ""
	}
	if len(s) > max && utf8.RuneCountInString(s) > max {
		errs.add(name, fmt.Sprintf("must be at most %d characters", max))
		return ""
	}
	return s
}

// emailField reads an address, normalized (trimmed, lower-cased).
func emailField(m map[string]jv, name string, required bool, errs *fieldErrs) string {
	v, ok := present(m, name)
	if !ok {
		if required {
			errs.add(name, "is required")
		}
		return ""
	}
	s, err := jsonparser.ParseString(v.raw)
	if v.t != jsonparser.String || err != nil {
		errs.add(name, "must be a string")
		return ""
	}
	e, err := contacts.NormalizeEmail(s)
	if err != nil {
		errs.add(name, err.Error())
		return ""
	}
	return e
}

// addresses reads cc or bcc: one address or an array of at most
// MaxCopies, normalized and without duplicates.
func addresses(m map[string]jv, name string, errs *fieldErrs) []string {
	v, ok := present(m, name)
	if !ok {
		return nil
	}
	var list []string
	switch v.t {
	case jsonparser.String:
		s, err := jsonparser.ParseString(v.raw)
		if err != nil {
			errs.add(name, "must be an address or an array of addresses")
			return nil
		}
		list = []string{s}
	case jsonparser.Array:
		if json.Unmarshal(v.raw, &list) != nil {
			errs.add(name, "must be an address or an array of addresses")
			return nil
		}
	default:
		errs.add(name, "must be an address or an array of addresses")
		return nil
	}
	if len(list) > MaxCopies {
		errs.add(name, fmt.Sprintf("must hold at most %d addresses", MaxCopies))
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for i, a := range list {
		e, err := contacts.NormalizeEmail(a)
		if err != nil {
			errs.add(fmt.Sprintf("%s[%d]", name, i), err.Error())
			continue
		}
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

// contactField reads the `contact` object; its email, when given, must be
// the recipient.
func contactField(m map[string]jv, to string, errs *fieldErrs) *contactInput {
	v, ok := present(m, "contact")
	if !ok {
		return nil
	}
	c, ok := members(v.raw)
	if v.t != jsonparser.Object || !ok {
		errs.add("contact", "must be an object")
		return nil
	}
	out := &contactInput{}
	if _, ok := c["email"]; ok {
		e := emailField(c, "email", false, &fieldErrs{})
		if e == "" || (to != "" && e != to) {
			errs.add("contact.email", "must be the recipient's address (to) when given")
		}
	}
	opt := func(name string) *string {
		if _, ok := present(c, name); !ok {
			return nil
		}
		sub := &fieldErrs{}
		s := str(c, name, noLimit, sub)
		for j := range sub.fields {
			errs.add("contact."+sub.fields[j], strings.TrimPrefix(sub.msgs[j], sub.fields[j]+" "))
		}
		if len(sub.fields) > 0 {
			return nil
		}
		return &s
	}
	out.FirstName = opt("firstName")
	out.Country = opt("country")
	out.Language = opt("language")
	if cf, ok := present(c, "customFields"); ok {
		if cf.t != jsonparser.Object || json.Unmarshal(cf.raw, &out.CustomFields) != nil {
			errs.add("contact.customFields", "must be an object")
		}
	}
	// What the contact may carry (unknown custom field keys, dropped later,
	// are counted too: only a request of megabytes of <, > or & meets it).
	if field, msg, ok := contacts.CheckSize(contacts.Values{FirstName: out.FirstName, Country: out.Country,
		Language: out.Language, CustomFields: out.CustomFields}); !ok {
		errs.add("contact."+field, msg)
	}
	return out
}

// attachments reads and decodes the attachments array.
func attachments(m map[string]jv, errs *fieldErrs) []schemas.Attachment {
	v, ok := present(m, "attachments")
	if !ok {
		return nil
	}
	if v.t != jsonparser.Array {
		errs.add("attachments", "must be an array of objects")
		return nil
	}
	var list []map[string]jv
	bad := false
	_, err := jsonparser.ArrayEach(v.raw, func(item []byte, t jsonparser.ValueType, _ int, _ error) {
		o, ok := members(item)
		if t != jsonparser.Object || !ok {
			bad = true
			return
		}
		list = append(list, o)
	})
	if err != nil || bad {
		errs.add("attachments", "must be an array of objects")
		return nil
	}
	if len(list) > MaxAttachments {
		errs.add("attachments", fmt.Sprintf("must hold at most %d files", MaxAttachments))
		return nil
	}
	var out []schemas.Attachment
	total := 0
	cids := map[string]bool{}
	for i, a := range list {
		f := func(name string) string { return fmt.Sprintf("attachments[%d].%s", i, name) }
		sub := &fieldErrs{}
		name := str(a, "filename", noLimit, sub)
		ctype := str(a, "contentType", noLimit, sub)
		cid := str(a, "contentId", MaxContentID, sub)
		content := str(a, "content", 1<<30, sub)
		for j := range sub.fields {
			errs.add("attachments["+fmt.Sprint(i)+"]."+sub.fields[j], strings.TrimPrefix(sub.msgs[j], sub.fields[j]+" "))
		}
		if strings.TrimSpace(name) == "" && !hasField(sub, "filename") {
			errs.add(f("filename"), "is required")
		}
		if strings.ContainsAny(name, "/\\\r\n\x00") {
			errs.add(f("filename"), "must be a plain file name")
		}
		if ctype != "" {
			if _, _, err := mime.ParseMediaType(ctype); err != nil {
				errs.add(f("contentType"), "must be a media type such as image/png")
			}
		}
		if cid != "" {
			if !plainHeaderWord(cid) {
				errs.add(f("contentId"), "must be printable ASCII without spaces, quotes or angle brackets (it becomes the Content-ID header)")
			} else if cids[cid] {
				errs.add(f("contentId"), "must be unique")
			}
			cids[cid] = true
		}
		if content == "" && !hasField(sub, "content") {
			errs.add(f("content"), "is required (base64)")
			continue
		}
		data, err := base64.StdEncoding.DecodeString(strings.Map(dropSpace, content))
		if err != nil {
			errs.add(f("content"), "must be valid base64")
			continue
		}
		if len(data) > MaxAttachmentBytes {
			errs.add(f("content"), fmt.Sprintf("must decode to at most %d MB", MaxAttachmentBytes>>20))
			continue
		}
		total += len(data)
		if ctype == "" {
			ctype = mime.TypeByExtension(path.Ext(name))
		}
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		out = append(out, schemas.Attachment{Filename: name, ContentType: ctype, ContentID: cid, Content: data})
	}
	if total > MaxAttachmentTotal {
		errs.add("attachments", fmt.Sprintf("must total at most %d MB decoded", MaxAttachmentTotal>>20))
		return nil
	}
	return out
}

func dropSpace(r rune) rune {
	switch r {
	case ' ', '\n', '\r', '\t':
		return -1
	}
	return r
}

// plainHeaderWord reports whether s can be written into a header as is:
// printable US-ASCII without spaces, quotes or angle brackets.
func plainHeaderWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '<' || c == '>' {
			return false
		}
	}
	return true
}
