package smtp

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"sendstream/sinks/email/smtptest"
)

// BenchmarkSend hands 4 KB messages to a go-smtp server on loopback (in
// this process) over 8 pooled connections; the CPU of both ends counts.
func BenchmarkSend(b *testing.B) {
	srv := smtptest.Start(b, smtptest.Options{Discard: true})
	p, err := New(Config{Addr: srv.Addr, TLS: TLSNone, PoolSize: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	line := bytes.Repeat([]byte("x"), 74)
	var body []byte
	for len(body) < 4096 {
		body = append(append(body, line...), '\r', '\n')
	}
	ctx := context.Background()
	b.SetParallelism(4)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			m := msg(fmt.Sprint("b", i), "to@y.test")
			m.Raw = append(m.Raw, body...)
			if _, err := p.Send(ctx, m); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
