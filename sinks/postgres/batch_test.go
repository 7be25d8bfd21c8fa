package postgres

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// TestBatcherLingersOnlyAfterSharedStatements: with Linger set, a call
// after a one-call statement runs at once (the hour-long Linger would
// otherwise hold it), while after a shared statement a lone call waits for
// the next one and both share a statement.
func TestBatcherLingersOnlyAfterSharedStatements(t *testing.T) {
	var mu sync.Mutex
	var batches [][]int
	release := make(chan struct{})
	b := &Batcher[int, int]{Max: 2, Linger: time.Hour, Run: func(_ context.Context, in []int) ([]int, error) {
		mu.Lock()
		batches = append(batches, append([]int(nil), in...))
		first := len(batches) == 1
		mu.Unlock()
		if first {
			<-release // hold the first statement so the next two queue up
		}
		return in, nil
	}}
	defer b.Close()
	do := func(v int, wg *sync.WaitGroup) {
		defer wg.Done()
		if got, err := b.Do(context.Background(), v); err != nil || got != v {
			t.Errorf("call %d: %d %v", v, got, err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go do(1, &wg) // alone, after no statement: runs at once
	for {
		mu.Lock()
		n := len(batches)
		mu.Unlock()
		if n == 1 {
			break
		}
		runtime.Gosched()
	}
	wg.Add(2)
	go do(2, &wg)
	go do(3, &wg)
	for len(b.queue) < 2 {
		runtime.Gosched()
	}
	close(release)
	wg.Wait() // 2 and 3 shared the second statement (Max 2)
	wg.Add(1)
	go do(4, &wg) // after a shared statement: lingers for another call
	// Without Linger, 4 would run alone meanwhile.
	time.Sleep(100 * time.Millisecond)
	wg.Add(1)
	go do(5, &wg)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	want := [][]int{{1}, {2, 3}, {4, 5}} // in any order within a statement
	if len(batches) != len(want) {
		t.Fatalf("statements %v, want %v", batches, want)
	}
	for i, w := range want {
		got := append([]int(nil), batches[i]...)
		slices.Sort(got)
		if !slices.Equal(got, w) {
			t.Fatalf("statements %v, want %v", batches, want)
		}
	}
}
