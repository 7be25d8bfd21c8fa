package webhooktest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Receiver is a local HTTP(S) receiver that counts the requests it gets.
type Receiver struct {
	*httptest.Server
	// Hits counts the requests received.
	Hits atomic.Int64
}

// NewReceiver starts a receiver (TLS with a self-signed certificate when
// tlsOn) that calls h for each request, or answers 204 when h is nil. It
// closes when the test ends.
func NewReceiver(t testing.TB, tlsOn bool, h http.HandlerFunc) *Receiver {
	t.Helper()
	r := &Receiver{}
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.Hits.Add(1)
		if h != nil {
			h(w, req)
			return
		}
		w.WriteHeader(204)
	})
	if tlsOn {
		r.Server = httptest.NewTLSServer(wrapped)
	} else {
		r.Server = httptest.NewServer(wrapped)
	}
	t.Cleanup(r.Close)
	return r
}

// Port returns the receiver's port.
func (r *Receiver) Port() string {
	_, p, _ := net.SplitHostPort(r.Listener.Addr().String())
	return p
}

// PrivateSpellings are targets that are, or spell, private or internal
// addresses (issue 25's table and the odd forms clients accept).
var PrivateSpellings = []string{
	"http://127.0.0.1/",
	"http://127.0.0.1:8080/hook",
	"http://127.255.255.254/",
	"http://10.0.0.1/",
	"http://172.16.5.4/",
	"http://172.31.255.255/",
	"http://192.168.1.1/",
	"http://169.254.169.254/latest/meta-data/",
	"http://169.254.1.1/",
	"http://100.64.0.1/",
	"http://100.127.255.254/",
	"http://0.0.0.0/",
	"http://0.1.2.3/",
	"http://0/",
	"http://[::1]/",
	"http://[0:0:0:0:0:0:0:1]/",
	"http://[::]/",
	"http://[fc00::1]/",
	"http://[fd12:3456:789a::1]/",
	"http://[fe80::1]/",
	"http://[::ffff:127.0.0.1]/",
	"http://[::ffff:7f00:1]/",
	"http://[::ffff:169.254.169.254]/",
	"http://[::ffff:10.0.0.1]/",
	"http://[64:ff9b::7f00:1]/",
	"http://[::127.0.0.1]/",
	"http://2130706433/",
	"http://0x7f000001/",
	"http://0x7f.1/",
	"http://0x7F.0.0.1/",
	"http://0177.0.0.1/",
	"http://0177.1/",
	"http://017700000001/",
	"http://127.1/",
	"http://127.0.1/",
	"http://10.1/",
	"http://3232235777/",
	"http://0xa9fea9fe/",
	"http://localhost/",
	"http://localhost./",
	"http://LOCALHOST/",
	"http://LocalHost.:80/",
	"http://foo.localhost/",
	"http://ｌｏｃａｌｈｏｓｔ/",
	"http://１２７.０.０.１/",
	"https://127.0.0.1:443/",
	"http://224.0.0.1/",
	"http://255.255.255.255/",
}
