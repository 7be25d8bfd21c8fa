package ingest

import (
	"context"
	"encoding/json"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"sendstream/pipeline"
	"sendstream/schemas"
)

// finish publishes what the call produced and its request-log record, then
// writes the answer. For a 2xx the record travels with Result.Publish and
// the answer waits for every acknowledgement (acks=all): a 2xx is a promise.
// If publishing fails the answer becomes 503 "unavailable" (nothing was
// promised; with Result.Stored the answer says the change was kept).
// Records of other answers are published in the background.
func (s *Server) finish(ctx context.Context, rc *fasthttp.RequestCtx, rt *route, res Result, p Principal, reqID string, start time.Time, reqCompact bool) {
	body := encodeBody(res)
	status := res.Status
	logged := rt.Logged && p.Workspace != "" && !res.Unauthenticated
	if logged && reqID == "" {
		reqID = schemas.NewID()
	}
	ok := status >= 200 && status < 300

	var logEnv schemas.Envelope
	if logged {
		logEnv = s.logEnvelope(rc, p, reqID, status, body, reqCompact, asJSON(res), res.Produced, start)
	}
	if len(res.Publish) > 0 || (logged && ok) {
		var err error
		if logged && ok {
			err = s.publish(ctx, res.Publish, &logEnv)
		} else {
			err = s.publish(ctx, res.Publish, nil)
		}
		if err == nil && res.Published != nil {
			res.Published()
		}
		if err != nil {
			s.log.Error("publish before answering failed; answering 503", "route", rt.Method+" "+rt.Path, "err", err)
			if res.Stored && res.Outboxed {
				res = storedAndOutboxed()
			} else if res.Stored {
				res = storedNotPublished()
			} else {
				res = unavailable()
			}
			status, body, ok = res.Status, encodeBody(res), false
			res.Headers = nil
			if logged {
				// Same id: the record of this 503 replaces one that may have landed.
				logEnv = s.logEnvelope(rc, p, reqID, status, body, reqCompact, true, schemas.Produced{}, start)
			}
		}
	}
	if logged && !ok {
		s.enqueueLog(logEnv)
	}

	rc.SetStatusCode(status)
	pageHeaders(&rc.Response.Header, res.ContentType)
	for k, v := range res.Headers {
		rc.Response.Header.Set(k, v)
	}
	if reqID != "" {
		// Canonical already: skips Set's key normalisation (the value is copied).
		rc.Response.Header.SetCanonical(headerRequestID, unsafe.Slice(unsafe.StringData(reqID), len(reqID)))
	}
	if len(body) > 0 {
		ct := res.ContentType
		if ct == "" {
			ct = "application/json"
		}
		rc.SetContentType(ct)
		rc.SetBody(body)
	}
	rt.metrics.observe(status, time.Since(start))
}

var headerRequestID = []byte("X-Request-Id")

// storedNotPublished is the answer when a handler's change was committed
// but publishing what it announces failed: the change is kept, the
// events (webhooks, journeys) may be missing.
func storedNotPublished() Result {
	return Fail(503, "unavailable", "The change was stored, but announcing it failed: its events (webhooks, journeys) may be "+
		"missing. Repeating the request is safe; it may answer as if the change had already been made")
}

// storedAndOutboxed is the answer when a handler's change and its events
// were committed together (a transactional outbox) but publishing failed:
// the relay publishes the events later, under the same ids.
func storedAndOutboxed() Result {
	return Fail(503, "unavailable", "The change was stored, but announcing it failed for now: its events (webhooks, journeys) "+
		"will still be delivered, once, within a minute. Repeating the request is safe; it may answer as if the change had "+
		"already been made")
}

// asJSON reports whether encodeBody(res) is what encoding/json writes.
func asJSON(res Result) bool { return res.RawJSON || (res.Raw == nil && res.Body != nil) }

func encodeBody(res Result) []byte {
	if res.Raw != nil {
		return res.Raw
	}
	if res.Body == nil {
		return nil
	}
	b, err := json.Marshal(res.Body)
	if err != nil {
		b, _ = json.Marshal(ErrorBody{Error: "Internal error: could not encode the answer", Code: "internal_error"})
	}
	return b
}

// publish sends msgs plus an optional request-log record, grouped by topic,
// in one pipeline.PublishBatches call, and returns the first error.
func (s *Server) publish(ctx context.Context, msgs []Message, logEnv *schemas.Envelope) error {
	if len(msgs) == 0 && logEnv != nil { // the common case of a read-only call
		return s.deps.Publisher.Publish(ctx, schemas.TopicRequestLog, *logEnv)
	}
	var arr [2]pipeline.Batch // the usual call: its topic and the request log
	batches := arr[:0]
	for _, m := range msgs {
		batches = pipeline.AddToBatch(batches, m.Topic, m.Env)
	}
	if logEnv != nil {
		batches = pipeline.AddToBatch(batches, schemas.TopicRequestLog, *logEnv)
	}
	return pipeline.PublishBatches(ctx, s.deps.Publisher, batches...)
}

// logEnvelope builds the request-log record of a call: bodies redacted,
// then capped at Config.RequestLogBodyCap each. reqCompact and respJSON say
// the request and the response body are compact JSON.
func (s *Server) logEnvelope(rc *fasthttp.RequestCtx, p Principal, id string, status int, respBody []byte, reqCompact, respJSON bool, produced schemas.Produced, start time.Time) schemas.Envelope {
	reqText, t1 := redactCapped(rc.PostBody(), s.cfg.RequestLogBodyCap)
	respText, t2 := redactCapped(respBody, s.cfg.RequestLogBodyCap)
	at := start.UTC()
	rl := schemas.RequestLog{
		At:           at,
		Method:       string(rc.Method()),
		Path:         string(rc.Path()),
		Status:       status,
		DurationUS:   time.Since(start).Microseconds(),
		KeyID:        p.KeyID,
		KeyKind:      p.Kind,
		AppID:        p.AppID,
		MemberID:     p.MemberID,
		RequestBody:  schemas.Body(reqText),
		ResponseBody: schemas.Body(respText),
		Truncated:    t1 || t2,
		Produced:     produced,
		IP:           remoteIP(rc),
		UserAgent:    string(rc.UserAgent()),
	}
	// Redaction keeps compact JSON compact (it only replaces values with
	// strings); a cut body is not JSON.
	size := 512 + len(rl.Path) + len(rl.UserAgent) + logBodyLen(reqText, reqCompact && !t1) + logBodyLen(respText, respJSON && !t2)
	payload := appendRequestLog(make([]byte, 0, size), &rl, reqCompact && !t1, respJSON && !t2)
	return schemas.Envelope{
		ID: id, Workspace: p.Workspace, Type: schemas.TypeRequestLogged, Key: p.Workspace,
		OccurredAt: at, Payload: payload, PayloadCompact: true,
	}
}

// logBodyLen is the encoded length of a logged body: as it is when compact
// JSON, else as a JSON string.
func logBodyLen(body string, compact bool) int {
	if compact {
		return len(body)
	}
	return schemas.JSONStringLen(body)
}

// enqueueLog hands a record to the background publisher, dropping it (and
// counting the drop) when the queue is full rather than delaying the answer.
func (s *Server) enqueueLog(env schemas.Envelope) {
	select {
	case s.logq <- env:
	default:
		s.metrics.logDropped.Inc()
	}
}

// logLoop publishes queued request-log records in batches until Shutdown,
// then drains what is left.
func (s *Server) logLoop() {
	defer s.bg.Done()
	const maxBatch = 512
	batch := make([]schemas.Envelope, 0, maxBatch)
	fill := func() {
		for len(batch) < maxBatch {
			select {
			case env := <-s.logq:
				batch = append(batch, env)
			default:
				return
			}
		}
	}
	for {
		select {
		case env := <-s.logq:
			batch = append(batch[:0], env)
			fill()
			s.publishLogs(batch)
		case <-s.stopq:
			for {
				batch = batch[:0]
				fill()
				if len(batch) == 0 {
					return
				}
				s.publishLogs(batch)
			}
		}
	}
}

func (s *Server) publishLogs(batch []schemas.Envelope) {
	ctx, cancel := context.WithTimeout(s.base, 30*time.Second)
	defer cancel()
	if err := s.deps.Publisher.Publish(ctx, schemas.TopicRequestLog, batch...); err != nil {
		s.metrics.logDropped.Add(float64(len(batch)))
		s.log.Warn("request-log records of non-2xx answers lost", "count", len(batch), "err", err)
	}
}
