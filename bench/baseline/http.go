package baseline

import (
	"encoding/json"
	"strconv"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"sendstream/bench/load"
)

// FROZEN: the bare HTTP baselines. Plain fasthttp, encoding/json, no
// routing, auth, limits or logging: the ceiling of what an HTTP tier on this
// machine can do.

func init() {
	register(&Baseline{
		Name:    "http-hello",
		Doc:     "bare fasthttp GET answering 200 with a tiny JSON body",
		Unit:    "requests",
		Handler: helloHandler,
		Request: func(baseURL string) *load.Request {
			return &load.Request{Method: "GET", URL: baseURL + "/hello"}
		},
	})
	register(&Baseline{
		Name:    "http-json",
		Doc:     "bare fasthttp POST of a 216-byte JSON event, decoded with encoding/json, answered 201 with a small JSON body",
		Unit:    "requests",
		Handler: eventHandler,
		Request: func(baseURL string) *load.Request {
			return &load.Request{Method: "POST", URL: baseURL + "/event", ContentType: "application/json", Vary: AppendEvent}
		},
	})
	register(&Baseline{
		Name:    "http-import",
		Doc:     "bare fasthttp POST of a 50-event JSON import body, decoded with encoding/json, answered 201 with a small JSON body",
		Unit:    "events",
		Handler: importHandler,
		Request: func(baseURL string) *load.Request {
			return &load.Request{Method: "POST", URL: baseURL + "/import", ContentType: "application/json",
				Vary: AppendImport, OpsPerRequest: ImportRows}
		},
	})
}

// event is the decoded shape of one event body.
type event struct {
	Name       string         `json:"name"`
	Email      string         `json:"email"`
	ContactID  string         `json:"contactId"`
	GoalType   string         `json:"goalType"`
	Value      *float64       `json:"value"`
	Currency   string         `json:"currency"`
	ExternalID string         `json:"externalId"`
	OccurredAt string         `json:"occurredAt"`
	Properties map[string]any `json:"properties"`
}

var ids atomic.Uint64

func helloHandler(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"hello":"world"}`)
}

func eventHandler(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.Error(`{"error":"method not allowed"}`, fasthttp.StatusMethodNotAllowed)
		return
	}
	var ev event
	if err := json.Unmarshal(ctx.PostBody(), &ev); err != nil || ev.Name == "" {
		ctx.Error(`{"error":"Invalid input"}`, fasthttp.StatusBadRequest)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusCreated)
	ctx.SetContentType("application/json")
	var buf [128]byte
	b := append(buf[:0], `{"id":"evt_`...)
	b = strconv.AppendUint(b, ids.Add(1), 10)
	b = append(b, `","contactId":null,"deduplicated":false,"status":"recorded"}`...)
	ctx.SetBody(b)
}

func importHandler(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.Error(`{"error":"method not allowed"}`, fasthttp.StatusMethodNotAllowed)
		return
	}
	var body struct {
		Events []event `json:"events"`
	}
	if err := json.Unmarshal(ctx.PostBody(), &body); err != nil || len(body.Events) == 0 {
		ctx.Error(`{"error":"Invalid input"}`, fasthttp.StatusBadRequest)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusCreated)
	ctx.SetContentType("application/json")
	var buf [128]byte
	b := append(buf[:0], `{"recorded":`...)
	b = strconv.AppendInt(b, int64(len(body.Events)), 10)
	b = append(b, `,"duplicates":0,"failed":0}`...)
	ctx.SetBody(b)
}

// Server returns a bare fasthttp server for an HTTP baseline; the bench
// binary's baseline-server mode serves it in its own process.
func (b *Baseline) Server() *fasthttp.Server {
	return &fasthttp.Server{Handler: b.Handler, Name: "baseline"}
}
