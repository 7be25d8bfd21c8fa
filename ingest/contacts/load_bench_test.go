package contacts_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"sendstream/ingest/ingesttest"
)

// BenchmarkUpsertHTTP drives POST /api/v1/contacts with 64 concurrent
// clients against the in-process server (new contacts), for profiling:
//
//	go test ./ingest/contacts -run x -bench UpsertHTTP -benchtime 20000x -cpuprofile /tmp/cpu.out
func BenchmarkUpsertHTTP(b *testing.B) {
	e := startB(b)
	ws, key := e.NewWorkspace(b, ingesttest.WorkspaceOpts{Plan: "enterprise", RateMultiplier: 1000000})
	e.field(b, ws, "plan", "string")
	var n atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := 0; c < 64; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					return
				}
				body := fmt.Sprintf(`{"email":"load%d@bench.example","firstName":"Bench","country":"DE","customFields":{"plan":"pro"}}`, i)
				req, _ := http.NewRequest("POST", e.URL+"/api/v1/contacts", bytes.NewBufferString(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := e.Client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 201 {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkPageHTTP pages through an existing big workspace (PROBE_WS, e.g.
// the bench's) with 16 concurrent clients, for profiling.
func BenchmarkPageHTTP(b *testing.B) {
	ws := os.Getenv("PROBE_WS")
	if ws == "" {
		b.Skip("set PROBE_WS")
	}
	e := startB(b)
	_, key, err := e.Store.CreateAPIKey(context.Background(), ws, "probe", nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					return
				}
				req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/contacts?limit=50&page=%d", e.URL, 1+(i*7919)%20000), nil)
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := e.Client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
}
