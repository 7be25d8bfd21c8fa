package transactional

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"sendstream/sinks/email/render"
)

// TemplateFile is the documented file format of `sendstream admin template
// create --file T.json` (example: deploy/examples/template.json):
//
//	{
//	  "name": "Order receipt",                  // optional label
//	  "subject": "Your order {{ order.id }}",   // Liquid, required
//	  "preheader": "Thanks, {{ contact.first_name | default: \"friend\" }}",
//	  "html": "<html>…</html>",                 // Liquid, required
//	  "text": "…",                              // Liquid; derived from html when empty
//	  "requiredVariables": ["order.id"],        // block a send when unresolved
//	  "translations": {                         // by language tag; missing parts
//	    "de": {"subject": "…", "html": "…"}     // fall back to the default
//	  }
//	}
//
// Every part is parsed when the file is read, so a broken template is
// refused by the admin command rather than by the first send.
type TemplateFile struct {
	Name              string                 `json:"name"`
	Subject           string                 `json:"subject"`
	Preheader         string                 `json:"preheader"`
	HTML              string                 `json:"html"`
	Text              string                 `json:"text"`
	RequiredVariables []string               `json:"requiredVariables"`
	Translations      map[string]Translation `json:"translations"`
}

var (
	variablePath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$`)
	languageTag  = regexp.MustCompile(`^[A-Za-z]{2,8}([-_][A-Za-z0-9]{1,8})*$`)
)

// ParseTemplateFile reads and checks a template file: known fields only,
// subject and html present, every part (and translation) valid Liquid,
// required variables plain paths, translation keys language tags.
func ParseTemplateFile(data []byte, engine *render.Engine) (Template, error) {
	var f TemplateFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Template{}, fmt.Errorf("template file: %w", err)
	}
	if strings.TrimSpace(f.Subject) == "" || strings.TrimSpace(f.HTML) == "" {
		return Template{}, errors.New("template file: subject and html are required")
	}
	if engine == nil {
		engine = render.NewEngine(16)
	}
	check := func(where string, src render.Source) error {
		if _, err := engine.Compile(src); err != nil {
			return fmt.Errorf("template file: %s: %w", where, err)
		}
		return nil
	}
	if err := check("default language", render.Source{Subject: f.Subject, Preheader: f.Preheader, HTML: f.HTML, Text: f.Text}); err != nil {
		return Template{}, err
	}
	for lang, tr := range f.Translations {
		if !languageTag.MatchString(lang) {
			return Template{}, fmt.Errorf("template file: translation %q: not a language tag", lang)
		}
		src := render.Source{Subject: or(tr.Subject, f.Subject), Preheader: or(tr.Preheader, f.Preheader), HTML: or(tr.HTML, f.HTML), Text: or(tr.Text, f.Text)}
		if err := check("translation "+lang, src); err != nil {
			return Template{}, err
		}
	}
	for _, v := range f.RequiredVariables {
		if !variablePath.MatchString(v) {
			return Template{}, fmt.Errorf("template file: required variable %q: want a path like order.id", v)
		}
	}
	return Template{Name: f.Name, Subject: f.Subject, Preheader: f.Preheader, HTML: f.HTML, Text: f.Text,
		Required: f.RequiredVariables, Translations: f.Translations}, nil
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
