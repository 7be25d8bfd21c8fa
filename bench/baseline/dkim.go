package baseline

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"io"

	"github.com/emersion/go-msgauth/dkim"
)

// FROZEN: the DKIM baseline: RSA-2048 signatures (relaxed/relaxed, SHA-256)
// of a 4 KB message with emersion/go-msgauth, one worker per core.

func init() {
	register(&Baseline{
		Name: "dkim-sign",
		Doc:  "DKIM RSA-2048 signing of a 4 KB message (go-msgauth), one worker per core",
		Unit: "signatures",
		Setup: func(ctx context.Context, env Env) (func(context.Context, int) (Op, error), func(), error) {
			key, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				return nil, nil, fmt.Errorf("generate key: %w", err)
			}
			msg := message4K()
			opts := &dkim.SignOptions{
				Domain:                 "bench.example.com",
				Selector:               "s1",
				Signer:                 key,
				HeaderCanonicalization: dkim.CanonicalizationRelaxed,
				BodyCanonicalization:   dkim.CanonicalizationRelaxed,
				HeaderKeys:             []string{"From", "To", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type"},
			}
			return func(context.Context, int) (Op, error) {
				return func(context.Context) (int, error) {
					if err := dkim.Sign(io.Discard, bytes.NewReader(msg), opts); err != nil {
						return 0, fmt.Errorf("sign: %w", err)
					}
					return 1, nil
				}, nil
			}, func() {}, nil
		},
	})
}
