package webhookdelivery_test

import (
	"regexp"
	"strings"
	"testing"

	"sendstream/stages/webhookdelivery"
)

// riverName is River's rule for queue names (client.go, nameRegex).
var riverName = regexp.MustCompile(`^(?:[a-z0-9])+(?:[_|\-]?[a-z0-9]+)*$`)

// TestQueueForPrefix: each topic prefix has a queue of its own that River
// accepts; no prefix is DefaultQueue.
func TestQueueForPrefix(t *testing.T) {
	if q := webhookdelivery.QueueFor(""); q != webhookdelivery.DefaultQueue {
		t.Fatalf("QueueFor(\"\") = %q", q)
	}
	seen := map[string]string{}
	for _, p := range []string{"t_01abc.", "T_01ABD.", "a..b", "._x_", strings.Repeat("long.prefix.", 10), strings.Repeat("long.prefix.", 10) + "2"} {
		q := webhookdelivery.QueueFor(p)
		if !riverName.MatchString(q) || len(q) > 64 || !strings.HasPrefix(q, webhookdelivery.DefaultQueue+"_") {
			t.Errorf("QueueFor(%q) = %q: not a River queue name of ours", p, q)
		}
		if other, dup := seen[q]; dup {
			t.Errorf("prefixes %q and %q share queue %q", other, p, q)
		}
		seen[q] = p
	}
}
