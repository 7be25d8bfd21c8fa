package mailsink

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"
)

//go:embed templates/*.html
var templateFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"addrs":  formatAddrs,
	"rcpts":  formatRcpts,
	"size":   formatSize,
	"srcdoc": srcdoc,
}).ParseFS(templateFS, "templates/*.html"))

// pageCSP applies to the inbox pages and, inherited, to the srcdoc frame
// that shows a message's HTML: no script runs anywhere (the frame's sandbox
// already forbids it); images, styles and fonts load as a mail client would
// load them; links may navigate the frame or open a new tab.
const pageCSP = "default-src 'none'; img-src * data:; style-src * 'unsafe-inline'; font-src * data:; media-src *; frame-src http: https:; form-action 'none'"

func (s *Sink) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.listPage)
	mux.HandleFunc("GET /messages/{id}", s.messagePage) // also {id}.eml
	mux.HandleFunc("GET /api/messages", s.apiList)
	mux.HandleFunc("GET /api/messages/{id}", s.apiMessage)
	mux.HandleFunc("DELETE /api/messages", s.apiClear)
	return loopbackOnly(mux)
}

// loopbackOnly refuses requests whose Host is not a loopback name, so that a
// web page cannot read the inbox through DNS rebinding, and sets the headers
// every answer carries.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !isLoopbackHost(strings.Trim(host, "[]")) {
			http.Error(w, "mailsink answers only to loopback host names", http.StatusForbidden)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func (s *Sink) listPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, "list.html", struct {
		Messages []Meta
		SMTPAddr string
		Max      int
	}{s.store.List(), s.SMTPAddr(), s.cfg.MaxMessages})
}

// message is one message with its parsed content: the page's data and the
// JSON of GET /api/messages/{id}.
type message struct {
	Meta
	Content
}

func (s *Sink) load(id string) (message, error) {
	m, ok := s.store.Get(id)
	if !ok {
		return message{}, ErrNotFound
	}
	raw, err := s.store.Raw(id)
	if err != nil {
		return message{}, err
	}
	c, _ := Parse(raw) // a message that does not parse still shows its envelope and headers
	return message{Meta: m, Content: c}, nil
}

func (s *Sink) messagePage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id, ok := strings.CutSuffix(id, ".eml"); ok {
		s.rawMessage(w, id)
		return
	}
	msg, err := s.load(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, "message.html", msg)
}

// rawMessage answers the message byte for byte, as text so that a browser
// shows it instead of handing it to a mail client.
func (s *Sink) rawMessage(w http.ResponseWriter, id string) {
	raw, err := s.store.Raw(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", `inline; filename="`+id+`.eml"`)
	_, _ = w.Write(raw)
}

func (s *Sink) apiList(w http.ResponseWriter, r *http.Request) {
	msgs := s.store.List()
	if to := strings.ToLower(strings.TrimSpace(r.URL.Query().Get("to"))); to != "" {
		kept := msgs[:0]
		for _, m := range msgs {
			if addressedTo(m, to) {
				kept = append(kept, m)
			}
		}
		msgs = kept
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
}

// addressedTo reports whether to (lower case) is an envelope recipient or in
// the To or Cc header of m.
func addressedTo(m Meta, to string) bool {
	for _, r := range m.RcptTo {
		if strings.ToLower(r) == to {
			return true
		}
	}
	for _, a := range append(append([]Address{}, m.To...), m.Cc...) {
		if strings.ToLower(a.Address) == to {
			return true
		}
	}
	return false
}

func (s *Sink) apiMessage(w http.ResponseWriter, r *http.Request) {
	msg, err := s.load(r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, msg)
}

func (s *Sink) apiClear(w http.ResponseWriter, r *http.Request) {
	n, err := s.store.Clear()
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
}

func (s *Sink) render(w http.ResponseWriter, name string, data any) {
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		s.fail(w, fmt.Errorf("mailsink: render %s: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", pageCSP)
	_, _ = w.Write([]byte(b.String()))
}

func (s *Sink) fail(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNotFound) {
		http.Error(w, "no such message", http.StatusNotFound)
		return
	}
	s.cfg.Logger.Error("mailsink: request failed", "err", err)
	http.Error(w, "internal error", http.StatusInternalServerError)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// formatAddrs joins mailboxes for display; fallback is shown when there are
// none (e.g. the envelope sender for a message without From).
func formatAddrs(list []Address, fallback string) string {
	if len(list) == 0 {
		return fallback
	}
	parts := make([]string, len(list))
	for i, a := range list {
		parts[i] = a.String()
	}
	return strings.Join(parts, ", ")
}

// formatRcpts shows the To header, or the envelope recipients without one.
func formatRcpts(m Meta) string {
	if len(m.To) > 0 {
		return formatAddrs(m.To, "")
	}
	return strings.Join(m.RcptTo, ", ")
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// srcdoc is the document of the HTML frame: the message's HTML with links
// opening in a new tab, outside the sandbox. The template escapes it into the
// attribute, so it cannot end the attribute or the iframe element.
func srcdoc(html string) string { return `<base target="_blank">` + html }
