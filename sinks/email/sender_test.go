package email_test

import (
	"testing"

	"sendstream/sinks/email"
)

func TestDefaultSender(t *testing.T) {
	for _, c := range []struct {
		policy   string
		domains  []string
		fallback string
		want     string
	}{
		{"hi@a.test", []string{"b.test"}, "x@c.test", "hi@a.test"},
		{"", []string{"b.test", "c.test"}, "x@c.test", "noreply@b.test"},
		{"", nil, "x@c.test", "x@c.test"},
		{"", nil, "", email.DefaultFromEmail},
	} {
		if got := email.DefaultSender(c.policy, c.domains, c.fallback); got != c.want {
			t.Errorf("DefaultSender(%q, %v, %q) = %q, want %q", c.policy, c.domains, c.fallback, got, c.want)
		}
	}
}
