// Package webhooktest holds test helpers for outgoing webhooks: a DNS
// server on loopback whose answers a test sets (rebinding names included),
// a counting HTTP receiver, and the table of private-address spellings.
// Tests only.
package webhooktest

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// DNS is a DNS server on loopback UDP that the test controls: it
// answers A queries for the names in its table with the next address of
// that name's list (the last one repeats), AAAA queries with no address,
// and anything else with NXDOMAIN. A list of two addresses is a rebinding
// name: the first lookup sees one address, every later lookup the other.
type DNS struct {
	conn net.PacketConn

	mu      sync.Mutex
	answers map[string][][]netip.Addr // lower-case FQDN → answer per query
	asked   map[string]int
}

// StartDNS runs a DNS until the test ends.
func StartDNS(t testing.TB) *DNS {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &DNS{conn: conn, answers: map[string][][]netip.Addr{}, asked: map[string]int{}}
	t.Cleanup(func() { conn.Close() })
	go s.serve()
	return s
}

// Set makes name answer each entry of seq in turn (each entry one answer,
// possibly of several addresses).
func (s *DNS) Set(name string, seq ...[]netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[strings.ToLower(strings.TrimSuffix(name, "."))+"."] = seq
}

// Resolver returns a pure-Go resolver that asks only this server.
func (s *DNS) Resolver() *net.Resolver {
	addr := s.conn.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func (s *DNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		out, err := s.answer(h, q)
		if err == nil {
			_, _ = s.conn.WriteTo(out, from)
		}
	}
}

func (s *DNS) answer(h dnsmessage.Header, q dnsmessage.Question) ([]byte, error) {
	name := strings.ToLower(q.Name.String())
	s.mu.Lock()
	seq, known := s.answers[name]
	var addrs []netip.Addr
	if known && q.Type == dnsmessage.TypeA {
		i := s.asked[name]
		s.asked[name]++
		addrs = seq[min(i, len(seq)-1)]
	}
	s.mu.Unlock()
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionAvailable: true}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	for _, a := range addrs {
		rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
		if err := b.AResource(rr, dnsmessage.AResource{A: a.As4()}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// Addrs parses addresses for DNS.Set.
func Addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}
