package contacts

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/page_all.sql
	sqlPageAll string
	//go:embed sql/page_status.sql
	sqlPageStatus string
	//go:embed sql/page_list.sql
	sqlPageList string
	//go:embed sql/page_list_status.sql
	sqlPageListStatus string
	//go:embed sql/search.sql
	sqlSearch string
)

// Page returns one page of ws's contacts, newest first, with the total that
// matches the filter, in one statement (one snapshot). A q.ListID must be a
// list of ws (see List). Cost does not grow with the page's depth.
func (s *Store) Page(ctx context.Context, ws string, q PageQuery) (Page, error) {
	b := &pgx.Batch{}
	b.Queue(sqlGenericPlans)
	switch {
	case q.ListID == "" && q.Status == "":
		b.Queue(sqlPageAll, ws, q.Offset, q.Limit)
	case q.ListID == "":
		b.Queue(sqlPageStatus, ws, q.Offset, q.Limit, q.Status)
	case q.Status == "":
		b.Queue(sqlPageList, q.ListID, q.Offset, q.Limit)
	default:
		b.Queue(sqlPageListStatus, q.ListID, q.Offset, q.Limit, q.Status)
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return Page{}, fmt.Errorf("page contacts of %s: %w", ws, err)
	}
	rows, err := br.Query()
	if err != nil {
		return Page{}, fmt.Errorf("page contacts of %s: %w", ws, err)
	}
	defer rows.Close()
	p := Page{Contacts: make([]Contact, 0, q.Limit)}
	for rows.Next() {
		var total *int64
		var id, email, status *string
		var c Contact
		var meta, custom []byte
		var created, updated *time.Time
		if err := rows.Scan(&total, &id, &email, &c.FirstName, &c.Country, &c.Language, &status, &c.Source,
			&meta, &custom, &created, &updated); err != nil {
			return Page{}, fmt.Errorf("page contacts of %s: %w", ws, err)
		}
		if id == nil {
			if total != nil {
				p.Total = *total
			}
			continue
		}
		c.ID, c.Email, c.Status = *id, *email, *status
		c.CustomFields, c.Metadata = rawOrEmpty(custom), rawOrNull(meta)
		c.CreatedAt, c.UpdatedAt = created.UTC(), updated.UTC()
		p.Contacts = append(p.Contacts, c)
	}
	if err := rows.Err(); err != nil {
		return Page{}, fmt.Errorf("page contacts of %s: %w", ws, err)
	}
	return p, nil
}

// Search returns the contact with that (normalized) email in ws with its
// memberships, or nil when there is none.
func (s *Store) Search(ctx context.Context, ws, email string) (*ContactWithLists, error) {
	var c ContactWithLists
	var meta, custom, lists []byte
	err := s.pool.QueryRow(ctx, sqlSearch, ws, email).Scan(&c.ID, &c.Email, &c.FirstName, &c.Country, &c.Language,
		&c.Status, &c.Source, &meta, &custom, &c.CreatedAt, &c.UpdatedAt, &lists)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("search contact in %s: %w", ws, err)
	}
	c.CustomFields, c.Metadata = rawOrEmpty(custom), rawOrNull(meta)
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	if err := json.Unmarshal(lists, &c.Lists); err != nil {
		return nil, fmt.Errorf("search contact in %s: decode lists: %w", ws, err)
	}
	for i := range c.Lists {
		m := &c.Lists[i]
		m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
		if m.ConfirmedAt != nil {
			t := m.ConfirmedAt.UTC()
			m.ConfirmedAt = &t
		}
	}
	return &c, nil
}
