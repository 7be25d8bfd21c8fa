package webhookdelivery_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/webhook/webhooktest"
	"sendstream/stages/webhookdelivery"
)

// callLog records each call's webhook-id and X-Webhook-Attempt and
// answers status.
type callLog struct {
	mu     sync.Mutex
	calls  map[string][]int // message → attempt numbers, in order
	status int
}

func (c *callLog) handle(w http.ResponseWriter, r *http.Request) {
	var b struct{ ID string }
	_ = json.NewDecoder(r.Body).Decode(&b)
	n, _ := strconv.Atoi(r.Header.Get("X-Webhook-Attempt"))
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string][]int{}
	}
	c.calls[b.ID] = append(c.calls[b.ID], n)
	c.mu.Unlock()
	w.WriteHeader(c.status)
}

func (c *callLog) of(msg string) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls[msg])
}

// claimStage returns the stage with a scheduler on a queue of its own.
func claimStage(t *testing.T, ctx context.Context) *webhookdelivery.Stage {
	t.Helper()
	pg := pgFor(t)
	queue := "test_" + schemas.NewID()
	t.Cleanup(func() { _, _ = pg.Exec(context.Background(), `DELETE FROM river_job WHERE queue = $1`, queue) })
	sched, err := webhookdelivery.StartScheduler(ctx, pg, &pipelinetest.Publisher{}, webhookdelivery.SchedulerConfig{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback}, nil, sched)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestHandledAgainSendsNoAttemptTwice: every attempt is claimed in
// Postgres before it is sent. A delivery handled again (read again after a
// crash, or published twice) sends nothing more and returns the same
// attempt rows, after a success and after its quick attempts failed; and
// when an attempt was claimed but never settled (the process died during
// it), the envelope handled again sends the attempts after it, never that
// one, and logs it as failed with its outcome unknown.
func TestHandledAgainSendsNoAttemptTwice(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := claimStage(t, ctx)
	ok := &callLog{status: 204}
	okRcv := webhooktest.NewReceiver(t, false, ok.handle)
	failing := &callLog{status: 500}
	failRcv := webhooktest.NewReceiver(t, false, failing.handle)
	okSub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", okRcv.URL)
	failSub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", failRcv.URL)

	ids := func(outs []schemas.Envelope) []string {
		s := make([]string, len(outs))
		for i, o := range outs {
			s[i] = o.ID
		}
		return s
	}
	msgOf := func(env schemas.Envelope) string {
		var d schemas.WebhookDelivery
		_ = json.Unmarshal(env.Payload, &d)
		return d.MessageID
	}

	// A success, handled twice: one call, the same rows.
	env := delivery(t, ws, schemas.WebhookTargetSubscription, okSub, okRcv.URL, 1)
	first, err := st.Handle(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	again, err := st.Handle(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := ok.of(msgOf(env)); !slices.Equal(got, []int{1}) {
		t.Errorf("a success handled twice: attempts %v sent, want [1]", got)
	}
	if !slices.Equal(ids(first), ids(again)) || len(first) != 1 {
		t.Errorf("rows %v, then %v", ids(first), ids(again))
	}

	// Three failures, handled twice: attempts 1-3 once, the same rows.
	env = delivery(t, ws, schemas.WebhookTargetSubscription, failSub, failRcv.URL, 1)
	first, err = st.Handle(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	again, err = st.Handle(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := failing.of(msgOf(env)); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("three failures handled twice: attempts %v sent, want [1 2 3]", got)
	}
	if !slices.Equal(ids(first), ids(again)) || len(first) != 3 {
		t.Errorf("rows %v, then %v", ids(first), ids(again))
	}

	// Attempt 1 claimed and never settled, as a process killed during it
	// leaves it: attempts 2 and 3 are sent, attempt 1 is not.
	env = delivery(t, ws, schemas.WebhookTargetSubscription, failSub, failRcv.URL, 1)
	msg := msgOf(env)
	if _, err := pg.Exec(ctx, `INSERT INTO webhook_delivery_claims (delivery, attempt, throttled, state, replay, claimed_at)
		VALUES ($1, 1, 0, 'sending', false, now())`, msg+"/"+failSub); err != nil {
		t.Fatal(err)
	}
	outs, err := st.Handle(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := failing.of(msg); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("after an interrupted attempt 1: attempts %v sent, want [2 3]", got)
	}
	as := attempts(t, outs)
	if want := []string{"1:retry", "2:retry", "3:retry"}; !slices.Equal(outcomes(as), want) {
		t.Fatalf("attempt rows %v, want %v", outcomes(as), want)
	}
	if !strings.Contains(as[0].Error, "outcome unknown") || as[0].StatusCode != 0 || as[0].NextAttemptAt == nil {
		t.Errorf("the interrupted attempt's row: %+v", as[0])
	}
	var state string
	var attempt int
	if err := pg.QueryRow(ctx, `SELECT state, attempt FROM webhook_delivery_claims WHERE delivery = $1`, msg+"/"+failSub).Scan(&state, &attempt); err != nil {
		t.Fatal(err)
	}
	if state != "settled" || attempt != 3 {
		t.Errorf("claim %s at attempt %d, want settled at 3 (attempt 4 scheduled)", state, attempt)
	}
}
