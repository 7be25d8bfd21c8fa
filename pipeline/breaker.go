package pipeline

import "sendstream/sinks/breaker"

// ErrBreakerOpen is breaker.ErrOpen, wrapped by a breaker's Do while it
// rejects calls. A Handle error wrapping it is retried after BackoffMax
// without using up the envelope's retries.
var ErrBreakerOpen = breaker.ErrOpen

// Breaker is breaker.Breaker.
//
// Deprecated: use sendstream/sinks/breaker.
type Breaker = breaker.Breaker

// NewBreaker returns breaker.New(name).
//
// Deprecated: use sendstream/sinks/breaker.
func NewBreaker(name string) *Breaker { return breaker.New(name) }

// Permanent tells the circuit breaker (sinks/breaker) that the error is no
// sign of the dependency failing.
func (e permanentError) Permanent() bool { return true }
