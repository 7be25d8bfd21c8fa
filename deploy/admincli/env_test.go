package admincli

import (
	"context"
	"io"
	"testing"
)

// closer counts its Close calls.
type closer struct{ closed int }

func (c *closer) Close() error { c.closed++; return nil }

// TestEnvPublisherOpensOnceAndCloses: without an opener Publisher fails;
// with one it opens on the first call only, and Close closes it.
func TestEnvPublisherOpensOnceAndCloses(t *testing.T) {
	var pgCalls, chCalls int
	if _, err := countingEnv(&pgCalls, &chCalls).Publisher(context.Background()); err == nil {
		t.Fatal("Publisher without an opener: want an error")
	}
	c, opens := &closer{}, 0
	env := countingEnv(&pgCalls, &chCalls).WithPublisher(func(context.Context) (io.Closer, error) { opens++; return c, nil })
	for range 2 {
		if p, err := env.Publisher(context.Background()); err != nil || p != c {
			t.Fatalf("Publisher = %v, %v", p, err)
		}
	}
	env.Close()
	if opens != 1 || c.closed != 1 || pgCalls+chCalls != 0 {
		t.Fatalf("opened %d, closed %d, other stores opened %d times", opens, c.closed, pgCalls+chCalls)
	}
}
