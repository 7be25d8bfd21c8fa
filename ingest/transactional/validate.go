package transactional

import "context"

// validateAnswer is the body of POST /v1/transactional/validate.
type validateAnswer struct {
	Valid      bool      `json:"valid"`
	Subject    *string   `json:"subject"`
	Preheader  *string   `json:"preheader,omitempty"`
	HTML       *string   `json:"html"`
	Text       *string   `json:"text"`
	Variables  []string  `json:"variables"`
	Unresolved []string  `json:"unresolved"`
	Warnings   []string  `json:"warnings"`
	Missing    []string  `json:"missing"`
	Errors     []refusal `json:"errors"`
	Language   string    `json:"language,omitempty"`
	From       string    `json:"from,omitempty"`
}

// validate renders exactly as a send would and stores nothing.
func (s *service) validate(ctx context.Context, ws, wsName string, req *sendRequest) (validateAnswer, error) {
	p, err := s.prepare(ctx, ws, wsName, req, true)
	if err != nil {
		return validateAnswer{}, err
	}
	a := validateAnswer{Variables: nonNil(p.variables), Unresolved: nonNil(p.unresolved), Warnings: nonNil(p.warnings),
		Missing: []string{}, Errors: p.refusals, Language: p.language, From: p.from.Email}
	for _, r := range p.refusals {
		a.Missing = append(a.Missing, r.Missing...)
	}
	if out := p.out; out != nil {
		a.Subject, a.HTML, a.Text = &out.Subject, &out.HTML, &out.Text
		if out.Preheader != "" {
			a.Preheader = &out.Preheader
		}
	}
	if a.Errors == nil {
		a.Errors = []refusal{}
	}
	a.Valid = len(a.Errors) == 0
	return a, nil
}
