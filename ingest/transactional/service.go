package transactional

import (
	"context"
	"strings"
	"sync"

	"sendstream/ingest/contacts"
	"sendstream/schemas"
	"sendstream/sinks/email/render"
)

// service is the transactional domain: deciding, storing and publishing
// sends; the handlers call it.
type service struct {
	store    *Store
	contacts *contacts.Store
	engine   *render.Engine
	defFrom  string

	tplMu sync.Mutex
	tpls  map[string]*Template // by id; replaced when the stored version moves
	// tplHTML holds each template version's HTML (per language) encoded
	// as a JSON string, for the send envelope.
	tplHTML map[tplHTMLKey][]byte
}

// tplHTMLKey names one template version's HTML in one language.
type tplHTMLKey struct {
	id      string
	version int64
	lang    string
}

// templateHTMLJSON returns html, the HTML of template t in language lang,
// encoded as a JSON string, from the cache after the first time.
func (s *service) templateHTMLJSON(t *Template, lang, html string) []byte {
	k := tplHTMLKey{t.ID, t.Version, lang}
	s.tplMu.Lock()
	enc, ok := s.tplHTML[k]
	s.tplMu.Unlock()
	if ok {
		return enc
	}
	enc = schemas.AppendJSONString(nil, html)
	s.tplMu.Lock()
	if s.tplHTML == nil || len(s.tplHTML) > 10000 {
		s.tplHTML = map[tplHTMLKey][]byte{}
	}
	s.tplHTML[k] = enc
	s.tplMu.Unlock()
	return enc
}

// template returns a workspace's template at the stored version, from the
// cache when that version was read before.
func (s *service) template(ctx context.Context, ws, id string, version int64) (*Template, error) {
	s.tplMu.Lock()
	t := s.tpls[id]
	s.tplMu.Unlock()
	if t != nil && t.Version == version {
		return t, nil
	}
	loaded, err := s.store.Template(ctx, ws, id)
	if err != nil {
		return nil, err
	}
	s.tplMu.Lock()
	if cur := s.tpls[id]; cur == nil || cur.Version < loaded.Version {
		if len(s.tpls) > 10000 {
			clear(s.tpls)
		}
		s.tpls[id] = &loaded
	}
	s.tplMu.Unlock()
	return &loaded, nil
}

// source returns the template's parts in the language asked for (exact, then
// its primary subtag), with missing parts from the default language, and the
// language used ("" for the default).
func (t *Template) source(lang string) (render.Source, string) {
	src := render.Source{Subject: t.Subject, Preheader: t.Preheader, HTML: t.HTML, Text: t.Text}
	if lang == "" || len(t.Translations) == 0 {
		return src, ""
	}
	tr, used, ok := t.translation(lang)
	if !ok {
		return src, ""
	}
	if tr.Subject != "" {
		src.Subject = tr.Subject
	}
	if tr.Preheader != "" {
		src.Preheader = tr.Preheader
	}
	if tr.HTML != "" {
		src.HTML = tr.HTML
	}
	if tr.Text != "" {
		src.Text = tr.Text
	}
	return src, used
}

func (t *Template) translation(lang string) (Translation, string, bool) {
	want := strings.ToLower(strings.ReplaceAll(lang, "_", "-"))
	primary, _, _ := strings.Cut(want, "-")
	var best string
	for k := range t.Translations {
		lk := strings.ToLower(strings.ReplaceAll(k, "_", "-"))
		if lk == want {
			return t.Translations[k], k, true
		}
		if lk == primary {
			best = k
		}
	}
	if best != "" {
		return t.Translations[best], best, true
	}
	return Translation{}, "", false
}
