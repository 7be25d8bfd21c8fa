package contacts_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"sendstream/ingest/contacts"
)

func TestZZProbeBatch(t *testing.T) {
	ws := os.Getenv("PROBE_WS")
	if ws == "" {
		t.Skip()
	}
	e := start(t)
	for _, conc := range []int{16, 64, 256} {
		var wg sync.WaitGroup
		startT := time.Now()
		n := 4000
		sem := make(chan struct{}, conc)
		tag := time.Now().UnixNano()
		for i := 0; i < n; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func(i int) {
				defer wg.Done()
				defer func() { <-sem }()
				fn := "B"
				_, err := e.store.Upsert(context.Background(), ws, contacts.UpsertInput{Email: fmt.Sprintf("probe%d-%d@x.com", tag, i), Fields: contacts.Fields{FirstName: &fn, CustomFields: map[string]any{"plan": "pro"}}})
				if err != nil {
					t.Error(err)
				}
			}(i)
		}
		wg.Wait()
		el := time.Since(startT)
		nb := contacts.ProbeBatches.Swap(0)
		t.Logf("batches %d, mean rows %.1f, mean exec %v", nb, float64(contacts.ProbeBatchRows.Swap(0))/float64(nb), time.Duration(contacts.ProbeBatchNanos.Swap(0)/nb))
		t.Logf("conc %d: %d upserts in %s = %.0f/s", conc, n, el, float64(n)/el.Seconds())
	}
}
