package postgres

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestBatcherSharesStatements: concurrent calls share statements, each
// gets its own result, and a failed statement fails every call in it.
func TestBatcherSharesStatements(t *testing.T) {
	var statements atomic.Int32
	release := make(chan struct{})
	b := &Batcher[int, int]{Max: 64, Run: func(_ context.Context, in []int) ([]int, error) {
		if statements.Add(1) == 1 {
			<-release // hold the first statement so the others queue up
		}
		out := make([]int, len(in))
		for i, v := range in {
			if v < 0 {
				return nil, errors.New("negative")
			}
			out[i] = v * 2
		}
		return out, nil
	}}
	defer b.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if v, err := b.Do(context.Background(), 0); err != nil || v != 0 {
			t.Errorf("first call: %d %v", v, err)
		}
	}()
	for statements.Load() == 0 {
		runtime.Gosched() // until the first statement runs
	}
	for i := 1; i <= 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := b.Do(context.Background(), i); err != nil || v != 2*i {
				t.Errorf("call %d: %d %v", i, v, err)
			}
		}()
	}
	for len(b.queue) < 50 {
		runtime.Gosched() // until every call queued behind the first statement
	}
	close(release)
	wg.Wait()
	if n := statements.Load(); n != 2 {
		t.Errorf("%d statements for 51 calls, want 2 (one held, one for the 50 queued behind it)", n)
	}
	if _, err := b.Do(context.Background(), -1); err == nil {
		t.Error("a failed statement did not fail its call")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Do(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
}
