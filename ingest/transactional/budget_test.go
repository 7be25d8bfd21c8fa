package transactional_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

// nestedLoop is the template of issue 23's first defect: 10^10 iterations.
const nestedLoop = `{% for a in (1..100000) %}{% for b in (1..100000) %}x{% endfor %}{% endfor %}`

// budgetRefused asserts a send's answer: 400 TEMPLATE_ERROR, "Template
// error: html: the render exceeded its budget of …".
func budgetRefused(t *testing.T, what string, st int, ans map[string]any) {
	t.Helper()
	msg, _ := ans["error"].(string)
	// Either the render ran into the budget, or (loops over literal ranges
	// alone asking for more) the template was refused as it was parsed.
	if st != 400 || ans["code"] != "TEMPLATE_ERROR" || !strings.HasPrefix(msg, "Template error: html: ") ||
		!strings.Contains(msg, "budget of ") || !strings.Contains(msg, "loop iterations") && !strings.Contains(msg, "bytes of output") && !strings.Contains(msg, "render time") {
		t.Fatalf("%s: %d %v, want 400 TEMPLATE_ERROR naming the render budget", what, st, ans)
	}
}

// A send or validate of a template that exceeds a render budget is refused
// with 400 "Template error: …" naming the budget (validate: valid false
// with that error), and nothing is stored or published. The loops may run
// over the send's data (the fast path): the check renders with it.
func TestSendRefusesTemplatesOverTheRenderBudget(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{RateMultiplier: 100})
	cases := []struct {
		name string
		body map[string]any
	}{
		{"nested loop", map[string]any{"subject": "x", "htmlContent": nestedLoop}},
		{"loops over the data", map[string]any{"subject": "x", "data": map[string]any{"l": make([]int, 200)},
			"htmlContent": `{% for a in l %}{% for b in l %}{% for c in l %}x{% endfor %}{% endfor %}{% endfor %}`}},
		{"output bomb", map[string]any{"subject": "x", "data": map[string]any{"big": strings.Repeat("b", 100<<10)},
			"htmlContent": `{% for a in (1..100) %}{{ big }}{% endfor %}`}},
		{"string doubling without output", map[string]any{"subject": "x",
			"htmlContent": `{% assign s = "xx" %}{% for i in (1..64) %}{% assign s = s | append: s %}{% endfor %}ok`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.body["to"] = uniq("budget")
			c.body["externalId"] = "budget-" + schemas.NewID()
			start := time.Now()
			st, ans := e.send(key, c.body)
			budgetRefused(t, "send", st, ans)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the refusal took %s", took)
			}
			st, ans = e.call("POST", "/api/v1/transactional/validate", key, c.body)
			errs, _ := ans["errors"].([]any)
			if st != 200 || ans["valid"] != false || len(errs) == 0 {
				t.Fatalf("validate: %d %v", st, ans)
			}
			first := errs[0].(map[string]any)
			budgetRefused(t, "validate", 400, first)
		})
	}
	var n int
	if err := e.pg.QueryRow(context.Background(), "SELECT count(*) FROM transactional_messages WHERE workspace_id = $1", ws).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d messages stored (%v), want none", n, err)
	}
	if got := e.envelopes(schemas.TopicTransactional, schemas.TypeTransactionalSend, ws); len(got) != 0 {
		t.Fatalf("%d send envelopes published, want none", len(got))
	}
	// Within the budget the same shape of template is accepted.
	st, ans := e.send(key, map[string]any{"to": uniq("budget-ok"), "subject": "x", "htmlContent": `{% for a in (1..100) %}{% for b in (1..100) %}x{% endfor %}{% endfor %}`})
	if st != 201 {
		t.Fatalf("a loop within the budget: %d %v", st, ans)
	}
}

// Issue 23's "done when": one workspace sends the nested-loop template
// while another sends 100 ordinary messages. The bad send is refused at
// send time, and the ordinary messages all reach the SMTP server within
// 5 s. A template that gets past the send's check but exceeds the delivery
// stage's budget (here the stage runs under a lower one, as a worker
// configured apart from the edge would) fails with the budget as its
// reason, publishes its failed status, and is not retried.
func TestRenderBudgetKeepsDeliveryFair(t *testing.T) {
	e := newEnv(t, envOpts{settings: map[string]string{"render_max_iterations": "1000"}})
	badWS, badKey := e.workspace(ingesttest.WorkspaceOpts{RateMultiplier: 100})
	_, goodKey := e.workspace(ingesttest.WorkspaceOpts{RateMultiplier: 100})
	// Warm up: the stages have joined and deliver.
	st, ans := e.send(goodKey, map[string]any{"to": uniq("warm"), "subject": "warm", "htmlContent": "<p>warm</p>"})
	if st != 201 {
		t.Fatal(st, ans)
	}
	e.waitStatus(goodKey, ans["id"].(string), "sent")

	var wg sync.WaitGroup
	wg.Add(2)
	var badSt, lateSt int
	var badAns, lateAns map[string]any
	lateTo := uniq("late")
	go func() {
		defer wg.Done()
		badSt, badAns = e.send(badKey, map[string]any{"to": uniq("bad"), "subject": "bad", "htmlContent": nestedLoop})
		lateSt, lateAns = e.send(badKey, map[string]any{"to": lateTo, "subject": "late",
			"htmlContent": `{% for a in (1..50) limit: 50 %}{% for b in (1..50) limit: 50 %}y{% endfor %}{% endfor %}`})
	}()
	start := time.Now()
	addrs := make([]string, 100)
	var failures []string
	var mu sync.Mutex
	go func() {
		defer wg.Done()
		parallel(10, func(w int) {
			for i := w; i < len(addrs); i += 10 {
				addrs[i] = fmt.Sprintf("fair-%d-%s@example.test", i, schemas.NewID()[20:])
				st, ans := e.send(goodKey, map[string]any{"to": addrs[i], "subject": "Order {{ n }}", "data": map[string]any{"n": i},
					"htmlContent": `<p>Hi {{ contact.first_name | default: "there" }}, order {{ n }}.</p>`})
				if st != 201 {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%d %v", st, ans))
					mu.Unlock()
				}
			}
		})
	}()
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d ordinary sends refused, e.g. %s", len(failures), failures[0])
	}
	want := map[string]bool{}
	for _, a := range addrs {
		want[a] = true
	}
	for {
		got := 0
		for _, m := range e.smtp.Messages() {
			for _, rcpt := range m.To {
				if want[rcpt] {
					got++
				}
			}
		}
		if got >= len(want) {
			t.Logf("all %d ordinary messages arrived %s after the first send", got, time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("only %d of %d ordinary messages arrived within 5 s", got, len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}

	budgetRefused(t, "the nested-loop send", badSt, badAns)
	if lateSt != 201 {
		t.Fatalf("a send within the edge's budget: %d %v", lateSt, lateAns)
	}
	id := lateAns["id"].(string)
	got := e.waitStatus(badKey, id, "failed")
	const reason = "template error: html: the render exceeded its budget of 1000 loop iterations"
	if got["failureReason"] != reason {
		t.Fatalf("failure reason %q, want %q", got["failureReason"], reason)
	}
	failed := false
	for _, env := range e.waitEnvelopes(schemas.TopicMessageStatus, schemas.TypeTransactionalStatus, badWS, 1) {
		if strings.Contains(string(env.Payload), `"failed"`) && strings.Contains(string(env.Payload), "loop iterations") {
			failed = true
		}
	}
	if !failed {
		t.Fatal("no failed status envelope carries the budget reason")
	}
	if n := len(e.messagesTo(lateTo)); n != 0 {
		t.Fatalf("%d copies of the failed message reached the SMTP server", n)
	}
}
