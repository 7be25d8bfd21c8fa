package mailsink

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// indexFile is the JSON index kept beside the .eml files.
const indexFile = "index.json"

// ErrNotFound is returned for a message id the store does not hold.
var ErrNotFound = errors.New("mailsink: no such message")

// Address is one mailbox of a From, To or Cc header, decoded.
type Address struct {
	Name    string `json:"name,omitempty"`
	Address string `json:"address"`
}

// String formats the mailbox as `Name <address>`, or the address alone.
func (a Address) String() string {
	if a.Name == "" {
		return a.Address
	}
	return a.Name + " <" + a.Address + ">"
}

// Envelope is what the SMTP session said about a message, apart from the
// message itself.
type Envelope struct {
	MailFrom string   // MAIL FROM (empty for a bounce)
	RcptTo   []string // RCPT TO, in order
	AuthUser string   // the user name of AUTH, if the client authenticated
}

// Meta describes one stored message. The index holds one per message, and
// GET /api/messages returns them.
type Meta struct {
	ID         string    `json:"id"`
	ReceivedAt time.Time `json:"receivedAt"`
	Size       int64     `json:"size"`     // bytes of the raw message
	MailFrom   string    `json:"mailFrom"` // SMTP envelope sender
	RcptTo     []string  `json:"rcptTo"`   // SMTP envelope recipients
	AuthUser   string    `json:"authUser,omitempty"`
	From       []Address `json:"from"` // decoded From header
	To         []Address `json:"to"`   // decoded To header
	Cc         []Address `json:"cc,omitempty"`
	Subject    string    `json:"subject"` // decoded Subject header
	Date       string    `json:"date,omitempty"`
	MessageID  string    `json:"messageId,omitempty"`
}

// Store keeps messages as <id>.eml files under one directory plus a JSON
// index of their Meta, at most max of them (the oldest are dropped). It is
// safe for concurrent use; one process should own a directory at a time.
type Store struct {
	dir string
	max int

	mu   sync.Mutex
	msgs []Meta // oldest first
}

// OpenStore opens (creating if needed) the store in dir. It loads the index,
// or rebuilds it from the .eml files when it is missing or unreadable.
func OpenStore(dir string, max int) (*Store, error) {
	if max < 1 {
		return nil, fmt.Errorf("mailsink: open store: max messages must be at least 1, got %d", max)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mailsink: create %s: %w", dir, err)
	}
	s := &Store{dir: dir, max: max}
	b, err := os.ReadFile(filepath.Join(dir, indexFile))
	if err == nil && json.Unmarshal(b, &s.msgs) == nil {
		s.msgs = slices.DeleteFunc(s.msgs, func(m Meta) bool { return !validID(m.ID) })
	} else if err := s.rebuild(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trimLocked()
	if err := s.saveLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// rebuild recreates the index from the .eml files, ordered by modification
// time.
func (s *Store) rebuild() error {
	paths, err := filepath.Glob(filepath.Join(s.dir, "*.eml"))
	if err != nil {
		return fmt.Errorf("mailsink: rebuild index: %w", err)
	}
	s.msgs = s.msgs[:0]
	for _, p := range paths {
		id := strings.TrimSuffix(filepath.Base(p), ".eml")
		if !validID(id) {
			continue
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("mailsink: rebuild index: %w", err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("mailsink: rebuild index: %w", err)
		}
		m := metaOf(raw)
		m.ID, m.ReceivedAt, m.Size = id, fi.ModTime().UTC(), int64(len(raw))
		s.msgs = append(s.msgs, m)
	}
	sort.SliceStable(s.msgs, func(i, j int) bool { return s.msgs[i].ReceivedAt.Before(s.msgs[j].ReceivedAt) })
	return nil
}

// Add stores one message and returns its Meta. When the store then holds
// more than max messages, the oldest are deleted. An error means the message
// was not stored.
func (s *Store) Add(env Envelope, raw []byte) (Meta, error) {
	now := time.Now().UTC()
	m := metaOf(raw)
	m.ID, m.ReceivedAt, m.Size = newID(now), now, int64(len(raw))
	m.MailFrom, m.RcptTo, m.AuthUser = env.MailFrom, slices.Clone(env.RcptTo), env.AuthUser
	if m.RcptTo == nil {
		m.RcptTo = []string{}
	}
	path := s.emlPath(m.ID)
	if err := writeFileAtomic(path, raw); err != nil {
		return Meta{}, fmt.Errorf("mailsink: store message: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, m)
	dropped := s.trimLocked()
	if err := s.saveLocked(); err != nil {
		// Undo, so that the index and the files agree with the answer.
		s.msgs = s.msgs[:len(s.msgs)-1]
		s.msgs = append(dropped, s.msgs...)
		_ = os.Remove(path)
		return Meta{}, err
	}
	for _, d := range dropped {
		_ = os.Remove(s.emlPath(d.ID))
	}
	return m, nil
}

// trimLocked drops the oldest entries beyond max from the index and returns
// them; the caller deletes their files once the index is saved.
func (s *Store) trimLocked() []Meta {
	n := len(s.msgs) - s.max
	if n <= 0 {
		return nil
	}
	dropped := slices.Clone(s.msgs[:n])
	s.msgs = slices.Clone(s.msgs[n:])
	return dropped
}

// List returns the messages, newest first.
func (s *Store) List() []Meta {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.msgs)
	slices.Reverse(out)
	return out
}

// Get returns the Meta of one message.
func (s *Store) Get(id string) (Meta, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.indexLocked(id)
	if i < 0 {
		return Meta{}, false
	}
	return s.msgs[i], true
}

// Raw returns the message exactly as received; ErrNotFound if the store does
// not hold it.
func (s *Store) Raw(id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.indexLocked(id) < 0 {
		return nil, ErrNotFound
	}
	b, err := os.ReadFile(s.emlPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("mailsink: read %s: %w", id, err)
	}
	return b, nil
}

// Clear deletes every message and returns how many there were.
func (s *Store) Clear() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.msgs
	s.msgs = nil
	if err := s.saveLocked(); err != nil {
		s.msgs = old
		return 0, err
	}
	for _, m := range old {
		if err := os.Remove(s.emlPath(m.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return len(old), fmt.Errorf("mailsink: clear: %w", err)
		}
	}
	return len(old), nil
}

func (s *Store) indexLocked(id string) int {
	if !validID(id) {
		return -1
	}
	return slices.IndexFunc(s.msgs, func(m Meta) bool { return m.ID == id })
}

func (s *Store) saveLocked() error {
	msgs := s.msgs
	if msgs == nil {
		msgs = []Meta{}
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		return fmt.Errorf("mailsink: encode index: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(s.dir, indexFile), b); err != nil {
		return fmt.Errorf("mailsink: save index: %w", err)
	}
	return nil
}

func (s *Store) emlPath(id string) string { return filepath.Join(s.dir, id+".eml") }

// newID returns a sortable id: the UTC time of arrival and 8 random hex
// digits, e.g. 20250102-150405-0a1b2c3d.
func newID(t time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return t.Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// validID reports whether id can name a file of the store: lower-case hex
// digits and dashes only, so that no id reaches outside the directory.
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r == '-') {
			return false
		}
	}
	return true
}

// writeFileAtomic writes b to a temporary file beside path, then renames it
// over path, so readers never see a partial file.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
