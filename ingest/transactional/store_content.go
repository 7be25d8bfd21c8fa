package transactional

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"sendstream/schemas"
)

// This file stores what sends are made of: templates, send policies and
// sending domains.

// Template is a stored template.
type Template struct {
	ID           string                 `json:"id"`
	Name         string                 `json:"name"`
	Subject      string                 `json:"subject"`
	Preheader    string                 `json:"preheader"`
	HTML         string                 `json:"html"`
	Text         string                 `json:"text"`
	Required     []string               `json:"requiredVariables"`
	Translations map[string]Translation `json:"translations"`
	Version      int64                  `json:"version"`
}

// Translation is one language's version of a template; empty parts fall
// back to the template's own.
type Translation struct {
	Subject   string `json:"subject,omitempty"`
	Preheader string `json:"preheader,omitempty"`
	HTML      string `json:"html,omitempty"`
	Text      string `json:"text,omitempty"`
}

// Template reads a template.
func (s *Store) Template(ctx context.Context, ws, id string) (Template, error) {
	var t Template
	var tr []byte
	err := s.pool.QueryRow(ctx, sqlTemplate, ws, id).
		Scan(&t.ID, &t.Name, &t.Subject, &t.Preheader, &t.HTML, &t.Text, &t.Required, &tr, &t.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, ErrTemplateNotFound
	}
	if err != nil {
		return t, fmt.Errorf("read template %s: %w", id, err)
	}
	if err := json.Unmarshal(tr, &t.Translations); err != nil {
		return t, fmt.Errorf("read template %s: translations: %w", id, err)
	}
	return t, nil
}

// CreateTemplate stores t (validated by the caller) and returns its id.
func (s *Store) CreateTemplate(ctx context.Context, ws string, t Template) (string, error) {
	id := schemas.NewID()
	tr, err := json.Marshal(nonNilTranslations(t.Translations))
	if err != nil {
		return "", err
	}
	if _, err := s.pool.Exec(ctx, sqlTemplateCreate, id, ws, t.Name, t.Subject, t.Preheader, t.HTML, t.Text,
		nonNil(t.Required), tr); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	return id, nil
}

// UpdateTemplate replaces a template's content and returns its new version.
func (s *Store) UpdateTemplate(ctx context.Context, ws, id string, t Template) (int64, error) {
	tr, err := json.Marshal(nonNilTranslations(t.Translations))
	if err != nil {
		return 0, err
	}
	var v int64
	err = s.pool.QueryRow(ctx, sqlTemplateUpdate, ws, id, t.Name, t.Subject, t.Preheader, t.HTML, t.Text,
		nonNil(t.Required), tr).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrTemplateNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("update template: %w", err)
	}
	return v, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilTranslations(m map[string]Translation) map[string]Translation {
	if m == nil {
		return map[string]Translation{}
	}
	return m
}

// CreatePolicy stores a send policy and returns its id.
func (s *Store) CreatePolicy(ctx context.Context, ws string, p Policy) (string, error) {
	id := schemas.NewID()
	if p.Provider == "" {
		p.Provider = "smtp"
	}
	_, err := s.pool.Exec(ctx, sqlPolicyCreate, id, ws, p.Key, p.Kind, p.FromEmail, p.FromName, p.Provider)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return "", ErrPolicyExists
	}
	if err != nil {
		return "", fmt.Errorf("create send policy: %w", err)
	}
	return id, nil
}

// Domain is a sending domain with its DKIM selector and key.
type Domain struct {
	Domain     string
	Selector   string
	PrivateKey string // PEM
}

// AddDomain adds a sending domain with its DKIM key; adding an existing
// domain keeps its key. It returns the domain as stored.
func (s *Store) AddDomain(ctx context.Context, ws string, d Domain) (Domain, error) {
	out := Domain{Domain: d.Domain}
	err := s.pool.QueryRow(ctx, sqlDomainAdd, ws, d.Domain, d.Selector, nullable(d.PrivateKey)).Scan(&out.Selector, &out.PrivateKey)
	if err != nil {
		return out, fmt.Errorf("add domain %s: %w", d.Domain, err)
	}
	return out, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
