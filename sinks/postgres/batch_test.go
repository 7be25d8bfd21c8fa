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

// TestBatcherLingerWaitsForCallsThatArriveOneByOne: without Linger a call
// that finds the queue empty runs alone; with Linger it waits for the next
// call and they share a statement; a lone call still runs once Linger
// passes.
func TestBatcherLingerWaitsForCallsThatArriveOneByOne(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	newBatcher := func(linger time.Duration) *Batcher[int, int] {
		mu.Lock()
		sizes = nil
		mu.Unlock()
		return &Batcher[int, int]{Max: 2, Linger: linger, Run: func(_ context.Context, in []int) ([]int, error) {
			mu.Lock()
			sizes = append(sizes, len(in))
			mu.Unlock()
			return in, nil
		}}
	}
	check := func(what string, want ...int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(sizes, want) {
			t.Errorf("%s: statement sizes %v, want %v", what, sizes, want)
		}
	}
	do := func(b *Batcher[int, int], i int) {
		if v, err := b.Do(context.Background(), i); err != nil || v != i {
			t.Errorf("call %d: %d %v", i, v, err)
		}
	}

	b := newBatcher(0)
	do(b, 1)
	do(b, 2)
	b.Close()
	check("without Linger, one call after the other", 1, 1)

	// A minute of Linger and Max 2: the first call waits for the second,
	// made well after it, and both share one statement.
	b = newBatcher(time.Minute)
	first := make(chan struct{})
	go func() {
		defer close(first)
		do(b, 1)
	}()
	time.Sleep(50 * time.Millisecond) // without Linger the first runs alone meanwhile
	do(b, 2)
	<-first
	b.Close()
	check("with Linger", 2)

	b = newBatcher(time.Millisecond)
	do(b, 1)
	b.Close()
	check("a lone call with Linger", 1)
}
