package webhook

import "time"

// TargetTTL is how long the webhook stages reuse what they read of their
// targets: the fan-out a workspace's targets for one event, the delivery
// stage one target's URL and secrets. Every domain event asks the first
// (almost always to hear "none") and every delivery the second; one
// Postgres query each was the larger part of their cost. A new
// subscription or endpoint thus receives events within TargetTTL of its
// creation, and a deleted or disabled one may still receive deliveries
// for up to TargetTTL after the change (within one process, a 410 or a
// disable by the delivery stage itself takes effect at once).
const TargetTTL = time.Second
