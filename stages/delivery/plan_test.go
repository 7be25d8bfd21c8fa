package delivery

import (
	"regexp"
	"strings"
	"testing"

	"sendstream/deploy/stack"
)

// TestStatementsFindMessagesByPrimaryKey: the stage's statements run on a
// pool that plans them once per connection, generically. Planned while
// transactional_messages is empty (a fresh database), each must still find
// its rows by primary key alone: any other index (the status index took
// `status = 'queued'`) is walked whole on every batch once the table has
// grown.
func TestStatementsFindMessagesByPrimaryKey(t *testing.T) {
	pg := stack.PG(t)
	tables := []string{"transactional_messages", "transactional_payloads"}
	index := regexp.MustCompile(`(?:Index Scan|Index Only Scan|Bitmap Index Scan) (?:Backward )?(?:using|on) (\S+)`)
	for _, c := range []struct {
		name, sql string
		args      []string
	}{
		{"claim_queued", sqlClaimQueued, []string{`'{a,b}'`, `'token'`}},
		{"claim", sqlClaim, []string{`'{a,b}'`, `'token'`, `60`}},
		{"release", sqlRelease, []string{`'token'`, `'{a,b}'`}},
		{"finish", sqlFinish, []string{`'token'`, `'{a}'`, `'{sent}'`, `'{""}'`, `'{""}'`, `'{""}'`, `'{true}'`}},
		{"payloads", sqlPayloads, []string{`'{a,b}'`}},
	} {
		plan := stack.GenericPlan(t, pg, tables, c.sql, c.args...)
		used := index.FindAllStringSubmatch(plan, -1)
		if len(used) == 0 || strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s: no primary-key lookup in the plan:\n%s", c.name, plan)
		}
		for _, m := range used {
			if !strings.HasSuffix(m[1], "_pkey") {
				t.Errorf("%s: reads index %s, not the primary key:\n%s", c.name, m[1], plan)
			}
		}
	}
}
