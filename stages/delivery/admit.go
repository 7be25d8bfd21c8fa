package delivery

import (
	"context"
	"fmt"

	"sendstream/sinks/email"
)

// AdmitPerSend is how many messages the stage claims at once per hand-off
// its provider runs at once (email.Bounded): the next claims, renders and
// the recording of outcomes overlap the hand-offs in progress. 8, not 2:
// with 2 the claims went to Postgres in batches too small to share their
// cost, and transactional-e2e fell to 0.24 of its baseline at 955-1,019 µs
// of server+broker CPU per message, against 0.36-0.41 at 627-670 µs with 8
// (alternating runs, one quiet host; the binary before the admission rule
// measured 0.39-0.41). A kill -9 then fails at most 8 messages per relay
// connection as outcome unknown, still a fixed bound.
const AdmitPerSend = 8

// admit waits for one of the named provider's admission slots and returns
// its release. A Handle claims a message only while it holds a slot, until
// the claim is given back or the outcome recorded, so that at most
// AdmitPerSend × MaxSends messages are claimed at any time: a claim is
// never given back when the process dies, and the lease rule then fails
// the message as outcome unknown (it cannot tell one that waited for a
// connection from one whose relay answer was lost). Without admission
// every Handle in progress (Concurrency) claimed its message and then
// waited for one of the relay's few connections, so a kill -9 failed
// dozens of messages that were never handed off. A provider that is not
// email.Bounded, or cannot be opened, admits without waiting.
func (s *Stage) admit(ctx context.Context, name string) (func(), error) {
	slots := s.slots(name)
	if slots == nil {
		return func() {}, nil
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("delivery: wait for a hand-off slot of %s: %w", providerName(name), ctx.Err())
	}
	return func() { <-slots }, nil
}

// slots returns the admission slots of the named provider, made on first
// use; nil when it has none.
func (s *Stage) slots(name string) chan struct{} {
	prov, err := s.provider(name)
	if err != nil {
		return nil
	}
	b, ok := prov.(email.Bounded)
	if !ok || b.MaxSends() <= 0 {
		return nil
	}
	name = providerName(name)
	s.provMu.Lock()
	defer s.provMu.Unlock()
	c, ok := s.admission[name]
	if !ok {
		c = make(chan struct{}, AdmitPerSend*b.MaxSends())
		s.admission[name] = c
	}
	return c
}
