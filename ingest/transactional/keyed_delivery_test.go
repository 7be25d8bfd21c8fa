package transactional_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/email/smtptest"
)

// TestStatusesHaveTheirOwnTopic: the delivery stage's status changes go to
// TopicMessageStatus, which the messagestatus stage writes to ClickHouse;
// none goes to TopicTransactional, the topic the delivery stage reads, so
// it never reads its own output back.
func TestStatusesHaveTheirOwnTopic(t *testing.T) {
	e := newEnv(t, envOpts{})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	st, ans := e.send(key, map[string]any{"to": "topic@example.test", "subject": "Topics", "htmlContent": "<p>t</p>"})
	if st != 201 {
		t.Fatal(st, ans)
	}
	id := ans["id"].(string)
	e.waitStatus(key, id, "sent")
	statuses := e.waitEnvelopes(schemas.TopicMessageStatus, schemas.TypeTransactionalStatus, ws, 1)
	if len(statuses) != 1 || statuses[0].ID != schemas.ChildID(id, schemas.TypeTransactionalStatus+"/sent", 0) || statuses[0].Key != ws+":"+id {
		t.Errorf("statuses on %s: %v", schemas.TopicMessageStatus, statuses)
	}
	if got := e.envelopes(schemas.TopicTransactional, schemas.TypeTransactionalStatus, ws); len(got) != 0 {
		t.Errorf("%d status envelopes on %s, the topic delivery reads", len(got), schemas.TopicTransactional)
	}
	if rows := e.chStatuses(ws, id, 2); strings.Join(rows, ",") != "queued,sent" {
		t.Errorf("message log: %v, want queued,sent", rows)
	}
}

// TestSlowRelayForOneMessageHoldsNoOther: the relay holds one message's
// end of data until the others were delivered; the delivery stage, keyed
// by message, hands the others off meanwhile, and the held one is sent
// once released.
func TestSlowRelayForOneMessageHoldsNoOther(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	held := make(chan struct{})
	e := newEnv(t, envOpts{smtp: smtptest.Options{Data: func(m smtptest.Message) error {
		if strings.Contains(strings.Join(m.To, ","), "slow@") {
			once.Do(func() { close(held) })
			<-release
		}
		return nil
	}}})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // runs before the env's cleanups: a failed test does not leave the relay holding
	_, key := e.workspace(ingesttest.WorkspaceOpts{})
	st, ans := e.send(key, map[string]any{"to": "slow@example.test", "subject": "Slow", "htmlContent": "<p>s</p>"})
	if st != 201 {
		t.Fatal(st, ans)
	}
	slow := ans["id"].(string)
	<-held // the relay holds the slow message's end of data
	var ids []string
	for i := range 20 {
		st, ans := e.send(key, map[string]any{"to": fmt.Sprintf("fast%d@example.test", i), "subject": "Fast", "htmlContent": "<p>f</p>"})
		if st != 201 {
			t.Fatal(st, ans)
		}
		ids = append(ids, ans["id"].(string))
	}
	for _, id := range ids {
		e.waitStatus(key, id, "sent")
	}
	if got := e.pgStatus(slow); got != schemas.MessageQueued {
		t.Errorf("held message: %s, want still queued while the relay holds it", got)
	}
	free()
	e.waitStatus(key, slow, "sent")
	if n := len(e.messagesTo("slow@example.test")); n != 1 {
		t.Errorf("%d copies of the held message, want 1", n)
	}
}

// TestLongRelayOutageDeadLettersNothing: while the relay stays down for
// many times the runner's retry budget, messages never handed off stay
// queued: none is dead-lettered or failed, and each is sent once when the
// relay returns. The relay's breaker is set never to open here, so every
// try reaches the closed port and fails as "provider unavailable", not as
// an open breaker (which the runner never counted as an attempt).
func TestLongRelayOutageDeadLettersNothing(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	e.settings = map[string]string{"smtp_url": "smtp://" + e.smtp.Addr + "?tls=none&breaker_failures=1000000"}
	e.runStages()
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	e.smtp.Stop()
	var ids []string
	for i := range 3 {
		st, ans := e.send(key, map[string]any{"to": fmt.Sprintf("long%d@example.test", i), "subject": "Outage", "htmlContent": "<p>o</p>"})
		if st != 201 {
			t.Fatal(st, ans)
		}
		ids = append(ids, ans["id"].(string))
	}
	// The runner's budget here: 5 retries, 50 ms doubling to 300 ms, about
	// 1 s. The outage lasts several times that.
	time.Sleep(6 * time.Second)
	for _, id := range ids {
		if s := e.pgStatus(id); s != schemas.MessageQueued {
			t.Errorf("message %s is %s during the outage, want queued", id, s)
		}
	}
	if dl := e.envelopes(schemas.TopicDeadLetter, pipeline.TypeDeadLettered, ws); len(dl) != 0 {
		t.Fatalf("%d messages dead-lettered during the outage", len(dl))
	}
	e.smtp.Restart(t)
	for i, id := range ids {
		e.waitStatus(key, id, "sent")
		if n := len(e.messagesTo(fmt.Sprintf("long%d@example.test", i))); n != 1 {
			t.Errorf("message %d: %d copies, want 1", i, n)
		}
	}
}
