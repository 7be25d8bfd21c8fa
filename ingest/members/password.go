package members

import (
	"context"
	"fmt"

	"sendstream/ingest/auth"
)

// MinPasswordLen is the shortest password accepted when one is set.
const MinPasswordLen = 8

// errShortPassword is returned when a password is set that is too short.
var errShortPassword = fmt.Errorf("password must have at least %d characters", MinPasswordLen)

// Hasher hashes and verifies argon2id passwords (auth.HashPassword's
// parameters, PHC strings) with at most a fixed number of hashes running at
// once: each takes 19 MiB and tens of milliseconds of one core, so a burst
// of sign-ins queues instead of exhausting memory. Safe for concurrent use.
type Hasher struct {
	sem   chan struct{}
	dummy string // a hash of a random password, verified for unknown emails
}

// NewHasher returns a Hasher that runs at most concurrency hashes at once
// (at least 1).
func NewHasher(concurrency int) (*Hasher, error) {
	if concurrency < 1 {
		concurrency = 1
	}
	dummy, err := auth.HashPassword("no member has this password: " + fmt.Sprint(concurrency))
	if err != nil {
		return nil, fmt.Errorf("dummy password hash: %w", err)
	}
	return &Hasher{sem: make(chan struct{}, concurrency), dummy: dummy}, nil
}

func (h *Hasher) acquire(ctx context.Context) error {
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting to hash a password: %w", ctx.Err())
	}
}

// Hash returns the PHC string of password's argon2id hash; it waits for a
// free slot until ctx ends.
func (h *Hasher) Hash(ctx context.Context, password string) (string, error) {
	if len(password) < MinPasswordLen {
		return "", errShortPassword
	}
	if err := h.acquire(ctx); err != nil {
		return "", err
	}
	defer func() { <-h.sem }()
	return auth.HashPassword(password)
}

// Verify reports whether password matches hash, comparing in constant
// time. An empty hash (no such login) is verified against a dummy hash, so
// the answer takes as long as for a real one and is always false. It waits
// for a free slot until ctx ends.
func (h *Hasher) Verify(ctx context.Context, hash, password string) (bool, error) {
	if err := h.acquire(ctx); err != nil {
		return false, err
	}
	defer func() { <-h.sem }()
	if hash == "" {
		auth.VerifyPassword(h.dummy, password)
		return false, nil
	}
	return auth.VerifyPassword(hash, password), nil
}
