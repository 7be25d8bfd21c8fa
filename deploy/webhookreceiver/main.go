// Command webhookreceiver is a local https receiver for trying outgoing
// webhooks under `make run` (deploy/try-webhooks.sh, README "Try webhooks
// locally"): it listens on a loopback address with a self-signed
// certificate made at start, answers every POST with 204 and prints one
// JSON line per delivery (when it arrived, the headers, the body and
// whether the Standard Webhooks signature verifies with the endpoint's
// secret).
//
//	go run ./deploy/webhookreceiver [--listen 127.0.0.1:0] [--addr-file F] [--secret-file F]
//
// The server reaches it only with SENDSTREAM_WEBHOOK_ALLOW_PRIVATE=127.0.0.0/8
// and SENDSTREAM_WEBHOOK_INSECURE_TLS=1; it is a development tool, never a
// production receiver.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (port 0 picks a free port)")
	addrFile := flag.String("addr-file", "", "write the https URL it listens on to this file once it listens")
	secretFile := flag.String("secret-file", "", "file holding the endpoint's whsec_ secret, read at each delivery (verification is skipped while it is missing)")
	flag.Parse()
	if err := run(*listen, *addrFile, *secretFile); err != nil {
		log.Fatalf("webhookreceiver: %v", err)
	}
}

func run(listen, addrFile, secretFile string) error {
	cert, err := selfSigned()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", listen, err)
	}
	url := "https://" + ln.Addr().String()
	if addrFile != "" {
		if err := os.WriteFile(addrFile, []byte(url+"\n"), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", addrFile, err)
		}
	}
	fmt.Fprintf(os.Stderr, "webhookreceiver: listening on %s (self-signed certificate)\n", url)
	var mu sync.Mutex // one output line at a time
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		line := struct {
			ReceivedAt     string          `json:"receivedAt"`
			ReceivedAtNano int64           `json:"receivedAtUnixNano"`
			Method         string          `json:"method"`
			Path           string          `json:"path"`
			Headers        http.Header     `json:"headers"`
			Body           json.RawMessage `json:"body"`
			Signature      string          `json:"signature"`
		}{at.UTC().Format(time.RFC3339Nano), at.UnixNano(), r.Method, r.URL.Path, r.Header, rawOrString(body), verify(secretFile, body, r.Header)}
		b, _ := json.Marshal(line)
		mu.Lock()
		fmt.Println(string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	return srv.ServeTLS(ln, "", "")
}

// verify checks the Standard Webhooks headers with the secret in
// secretFile using the reference library.
func verify(secretFile string, body []byte, h http.Header) string {
	if h.Get("webhook-signature") == "" {
		return "unsigned"
	}
	if secretFile == "" {
		return "not checked (no --secret-file)"
	}
	b, err := os.ReadFile(secretFile)
	if err != nil {
		return "not checked: " + err.Error()
	}
	wh, err := standardwebhooks.NewWebhook(strings.TrimSpace(string(b)))
	if err != nil {
		return "not checked: " + err.Error()
	}
	if err := wh.Verify(body, h); err != nil {
		return "INVALID: " + err.Error()
	}
	return "verified (Standard Webhooks reference library)"
}

// rawOrString keeps a JSON body as JSON, anything else as a string.
func rawOrString(b []byte) json.RawMessage {
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}

// selfSigned makes a certificate for 127.0.0.1, ::1 and localhost, valid
// for a day.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "webhookreceiver (local, self-signed)"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
