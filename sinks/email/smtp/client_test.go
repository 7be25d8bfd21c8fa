package smtp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"sendstream/sinks/email"
)

func TestAppendLines(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ".\r\n"},
		{"a\r\nb\r\n", "a\r\nb\r\n.\r\n"},
		{"a\nb", "a\r\nb\r\n.\r\n"},
		{".x\r\n..y\r\nz.\r\n.\r\n", "..x\r\n...y\r\nz.\r\n..\r\n.\r\n"},
		{"a\r\n\r\n.\n", "a\r\n\r\n..\r\n.\r\n"},
		{"cr\ronly\r\n", "cr\ronly\r\n.\r\n"},
	} {
		if got := string(appendLines(nil, []byte(c.in), true)); got != c.want {
			t.Errorf("appendLines(%q, dot) = %q, want %q", c.in, got, c.want)
		}
		// As a BDAT chunk: the same lines, neither stuffed nor ended by ".".
		want := strings.ReplaceAll(strings.TrimSuffix(c.want, ".\r\n"), "\r\n..", "\r\n.")
		if strings.HasPrefix(want, "..") {
			want = want[1:]
		}
		if got := string(appendLines(nil, []byte(c.in), false)); got != want {
			t.Errorf("appendLines(%q) = %q, want %q", c.in, got, want)
		}
	}
}

// scripted runs one SMTP session by hand: greet, EHLO with the given
// extension lines, then script. It returns the address.
func scripted(t *testing.T, exts []string, script func(r *bufio.Reader, w io.Writer)) string {
	t.Helper()
	return sessions(t, 1, exts, func(_ int, r *bufio.Reader, nc net.Conn) { script(r, nc) })
}

// sessions is scripted for n connections, one after the other: session i
// runs script(i, r, nc) and its connection closes when script returns.
func sessions(t *testing.T, n int, exts []string, script func(i int, r *bufio.Reader, nc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for i := range n {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			func() {
				defer nc.Close()
				_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
				r := bufio.NewReader(nc)
				io.WriteString(nc, "220 scripted ESMTP\r\n")
				line, _ := r.ReadString('\n')
				if !strings.HasPrefix(line, "EHLO ") {
					t.Errorf("first command %q, want EHLO", line)
					return
				}
				reply := "250-scripted hello"
				for _, e := range exts {
					reply += "\r\n250-" + e
				}
				io.WriteString(nc, reply+"\r\n250 HELP\r\n")
				script(i, r, nc)
			}()
		}
	}()
	return ln.Addr().String()
}

// readUntil reads lines up to and including the line stop.
func readUntil(t *testing.T, r *bufio.Reader, stop string) []string {
	var lines []string
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Errorf("reading up to %q: %v after %q", stop, err, lines)
			return lines
		}
		lines = append(lines, strings.TrimRight(l, "\r\n"))
		if lines[len(lines)-1] == stop {
			return lines
		}
	}
}

func sendOne(t *testing.T, addr string, m *email.Message) (email.Receipt, error) {
	t.Helper()
	p := newProvider(t, Config{Addr: addr, TLS: TLSNone, MaxAttempts: 1, Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Send(ctx, m)
}

// With PIPELINING the envelope goes in one write: this server answers
// nothing until it has read DATA, so a client waiting for each reply would
// time out.
func TestPipelinesTheEnvelope(t *testing.T) {
	got := make(chan []string, 1)
	addr := scripted(t, []string{"PIPELINING", "SIZE 1000000"}, func(r *bufio.Reader, w io.Writer) {
		env := readUntil(t, r, "DATA")
		io.WriteString(w, "250 2.1.0 ok\r\n250 2.1.5 ok\r\n250 2.1.5 ok\r\n354 go ahead\r\n")
		body := readUntil(t, r, ".")
		io.WriteString(w, "250 2.0.0 Ok: queued as ABC123\r\n")
		got <- append(env, body...)
	})
	m := msg("p1", "to@y.test", "cc@y.test")
	rec, err := sendOne(t, addr, m)
	if err != nil || rec.ProviderMessageID != "ABC123" {
		t.Fatalf("send: %+v %v", rec, err)
	}
	lines := <-got
	want := []string{"MAIL FROM:<a@x.test> SIZE=" + strconv.Itoa(len(m.Raw)), "RCPT TO:<to@y.test>", "RCPT TO:<cc@y.test>", "DATA"}
	for i, w := range want {
		if i >= len(lines) || lines[i] != w {
			t.Fatalf("envelope %q, want %q", lines, want)
		}
	}
	if !strings.Contains(strings.Join(lines, "\n"), "\n..leading dot\n") {
		t.Errorf("body not dot-stuffed: %q", lines)
	}
}

// Without PIPELINING each command waits for its reply: this server checks
// that nothing more has arrived before it answers.
func TestWaitsForEachReplyWithoutPipelining(t *testing.T) {
	addr := scripted(t, nil, func(r *bufio.Reader, w io.Writer) {
		for _, c := range []struct{ cmd, reply string }{
			{"MAIL FROM:<a@x.test>", "250 ok"},
			{"RCPT TO:<to@y.test>", "250 ok"},
			{"DATA", "354 go"},
		} {
			if l, _ := r.ReadString('\n'); l != c.cmd+"\r\n" {
				t.Errorf("got %q, want %q", l, c.cmd)
			}
			time.Sleep(20 * time.Millisecond)
			if r.Buffered() > 0 {
				t.Errorf("the client wrote ahead of the reply to %q", c.cmd)
			}
			io.WriteString(w, c.reply+"\r\n")
		}
		readUntil(t, r, ".")
		io.WriteString(w, "250 queued\r\n")
	})
	if _, err := sendOne(t, addr, msg("np", "to@y.test")); err != nil {
		t.Fatal(err)
	}
}

// A refused primary recipient fails the message even when DATA was
// accepted for a secondary one: the client drops the connection before
// the end of data, so nothing is delivered.
func TestPrimaryRefusedAfterDataAcceptedAbandons(t *testing.T) {
	result := make(chan string, 1)
	addr := scripted(t, []string{"PIPELINING"}, func(r *bufio.Reader, w io.Writer) {
		readUntil(t, r, "DATA")
		io.WriteString(w, "250 ok\r\n550 5.1.1 no such user\r\n250 ok\r\n354 go ahead\r\n")
		rest, err := io.ReadAll(r)
		result <- string(rest) + " / " + errString(err)
	})
	_, err := sendOne(t, addr, msg("ab", "nobody@y.test", "cc@y.test"))
	var re *email.RefusedError
	if !errors.As(err, &re) || !strings.Contains(re.Reason, "550 5.1.1 no such user") {
		t.Fatalf("err = %v, want the primary's refusal", err)
	}
	if got := <-result; got != " / <nil>" {
		t.Errorf("after the refusal the server read %q, want a closed connection and no data", got)
	}
}

// A relay that does not know EHLO gets HELO, replies spanning several
// lines are read whole, and 251 (will forward) accepts a recipient.
func TestHeloFallbackAndMultilineReplies(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		r := bufio.NewReader(nc)
		io.WriteString(nc, "220-old relay\r\n220 still greeting\r\n")
		for _, reply := range []string{"502 what\r\n", "250 hi\r\n", "250 ok\r\n", "251 2.1.5 not local, will forward\r\n", "354 go\r\n"} {
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
			io.WriteString(nc, reply)
		}
		readUntil(t, r, ".")
		io.WriteString(nc, "250-accepted\r\n250 queued as Q9\r\n")
	}()
	rec, err := sendOne(t, ln.Addr().String(), msg("helo", "to@y.test"))
	if err != nil || rec.ProviderMessageID != "Q9" {
		t.Fatalf("send: %+v %v", rec, err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// A pooled connection the relay closes with 421 (idle time-out) costs no
// attempt: the message goes out at once on a fresh connection.
func TestClosingReplyRetriesOnAFreshConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	delivered := make(chan string, 4)
	go func() {
		for n := 0; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func(n int) {
				defer nc.Close()
				r := bufio.NewReader(nc)
				// lines reads up to the line stop; nil once the client hangs up.
				lines := func(stop string) []string {
					var ls []string
					for {
						l, err := r.ReadString('\n')
						if err != nil {
							return nil
						}
						ls = append(ls, strings.TrimRight(l, "\r\n"))
						if ls[len(ls)-1] == "QUIT" {
							io.WriteString(nc, "221 bye\r\n")
							return nil
						}
						if ls[len(ls)-1] == stop || stop == "" {
							return ls
						}
					}
				}
				io.WriteString(nc, "220 relay\r\n")
				lines("")
				io.WriteString(nc, "250-relay\r\n250 PIPELINING\r\n")
				for {
					env := lines("DATA")
					if env == nil {
						return
					}
					if n == 0 && strings.Contains(env[0], "second") {
						io.WriteString(nc, "421 4.4.2 idle too long, closing\r\n")
						return
					}
					io.WriteString(nc, "250 ok\r\n250 ok\r\n354 go\r\n")
					lines(".")
					io.WriteString(nc, "250 queued\r\n")
					delivered <- env[0]
				}
			}(n)
		}
	}()
	p := newProvider(t, Config{Addr: ln.Addr().String(), TLS: TLSNone, MaxAttempts: 1, PoolSize: 1, Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, from := range []string{"first@x.test", "second@x.test"} {
		m := msg(from, "to@y.test")
		m.From = from
		if _, err := p.Send(ctx, m); err != nil {
			t.Fatalf("send from %s with one attempt: %v", from, err)
		}
		if got := <-delivered; !strings.Contains(got, from) {
			t.Fatalf("delivered %q, want from %s", got, from)
		}
	}
}

// A refused sender under PIPELINING: the replies to the RCPT and DATA
// that followed are read, so the next message on the same connection (after
// RSET) gets its own replies.
func TestRefusedSenderKeepsTheSessionInStep(t *testing.T) {
	var got []string
	addr := scripted(t, []string{"PIPELINING"}, func(r *bufio.Reader, w io.Writer) {
		readUntil(t, r, "DATA")
		io.WriteString(w, "550 5.7.1 sender rejected\r\n503 5.5.1 no MAIL\r\n503 5.5.1 no valid recipients\r\n")
		got = readUntil(t, r, "RSET")
		io.WriteString(w, "250 reset\r\n")
		readUntil(t, r, "DATA")
		io.WriteString(w, "250 ok\r\n250 ok\r\n354 go\r\n")
		readUntil(t, r, ".")
		io.WriteString(w, "250 queued as Q2\r\n")
	})
	p := newProvider(t, Config{Addr: addr, TLS: TLSNone, MaxAttempts: 1, PoolSize: 1, Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := p.Send(ctx, msg("bad", "to@y.test"))
	var re *email.RefusedError
	if !errors.As(err, &re) || !strings.Contains(re.Reason, "550 5.7.1") {
		t.Fatalf("refused sender: %v", err)
	}
	rec, err := p.Send(ctx, msg("good", "to@y.test"))
	if err != nil || rec.ProviderMessageID != "Q2" {
		t.Fatalf("next message on the connection: %+v %v", rec, err)
	}
	if len(got) == 0 || got[0] != "RSET" {
		t.Errorf("second transaction began %q, want RSET first", got)
	}
}

// chunkedRelay is a scripted session with PIPELINING and CHUNKING that reads
// one transaction, MAIL, RCPT and BDAT with its chunk, before it answers
// anything (so a client waiting for a reply in between would time out),
// then writes replies; it returns the commands and the chunk read.
func chunkedRelay(t *testing.T, r *bufio.Reader, w io.Writer, replies string) ([]string, string) {
	t.Helper()
	var cmds []string
	for len(cmds) < 3 {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Errorf("reading the envelope: %v after %q", err, cmds)
			return cmds, ""
		}
		cmds = append(cmds, strings.TrimRight(l, "\r\n"))
	}
	f := strings.Fields(cmds[2])
	if len(f) != 3 || f[0] != "BDAT" || f[2] != "LAST" {
		t.Errorf("third command %q, want BDAT <size> LAST", cmds[2])
		return cmds, ""
	}
	n, _ := strconv.Atoi(f[1])
	chunk := make([]byte, n)
	if _, err := io.ReadFull(r, chunk); err != nil {
		t.Errorf("reading a chunk of %d bytes: %v", n, err)
	}
	io.WriteString(w, replies)
	return cmds, string(chunk)
}

// With CHUNKING and one recipient the whole transaction is one write and
// one round trip: MAIL, RCPT and BDAT LAST with the message as it is (CRLF
// lines, no dot-stuffing, no final "." line).
func TestChunkedTransactionIsOneWrite(t *testing.T) {
	type got struct {
		cmds  []string
		chunk string
	}
	ch := make(chan got, 1)
	addr := scripted(t, []string{"PIPELINING", "CHUNKING", "8BITMIME", "SIZE 1000000"}, func(r *bufio.Reader, w io.Writer) {
		cmds, chunk := chunkedRelay(t, r, w, "250 2.1.0 ok\r\n250 2.1.5 ok\r\n250 2.0.0 Ok: queued as C1\r\n")
		ch <- got{cmds, chunk}
	})
	m := msg("c1", "to@y.test")
	m.Raw = append(m.Raw, "bare\nlf\n"...)
	rec, err := sendOne(t, addr, m)
	if err != nil || rec.ProviderMessageID != "C1" {
		t.Fatalf("send: %+v %v", rec, err)
	}
	g := <-ch
	want := strings.ReplaceAll(string(m.Raw), "bare\nlf\n", "bare\r\nlf\r\n")
	if g.chunk != want {
		t.Errorf("chunk %q, want %q", g.chunk, want)
	}
	wantCmds := []string{
		"MAIL FROM:<a@x.test> BODY=8BITMIME SIZE=" + strconv.Itoa(len(want)),
		"RCPT TO:<to@y.test>",
		"BDAT " + strconv.Itoa(len(want)) + " LAST",
	}
	if strings.Join(g.cmds, "|") != strings.Join(wantCmds, "|") {
		t.Errorf("commands %q, want %q", g.cmds, wantCmds)
	}
}

// A refused recipient under CHUNKING: the relay refuses the BDAT too and
// drops the chunk; the client reads that reply, so the next message on the
// same connection (after RSET) gets its own replies. A 4xx to the BDAT is
// the relay not taking the message: retried on the same connection.
func TestChunkedRefusalsKeepTheSessionInStep(t *testing.T) {
	var rset []string
	addr := scripted(t, []string{"PIPELINING", "CHUNKING"}, func(r *bufio.Reader, w io.Writer) {
		chunkedRelay(t, r, w, "250 ok\r\n550 5.1.1 no such user\r\n554 5.5.1 no valid recipients\r\n")
		rset = readUntil(t, r, "RSET")
		io.WriteString(w, "250 reset\r\n")
		chunkedRelay(t, r, w, "250 ok\r\n250 ok\r\n451 4.3.0 try again\r\n")
		chunkedRelay(t, r, w, "250 ok\r\n250 ok\r\n250 queued as Q3\r\n")
	})
	p := newProvider(t, Config{Addr: addr, TLS: TLSNone, MaxAttempts: 2, PoolSize: 1, Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := p.Send(ctx, msg("bad", "nobody@y.test"))
	var re *email.RefusedError
	if !errors.As(err, &re) || !strings.Contains(re.Reason, "550 5.1.1") {
		t.Fatalf("refused recipient: %v", err)
	}
	rec, err := p.Send(ctx, msg("good", "to@y.test"))
	if err != nil || rec.ProviderMessageID != "Q3" {
		t.Fatalf("next message, 451 then accepted: %+v %v", rec, err)
	}
	if len(rset) != 1 || rset[0] != "RSET" {
		t.Errorf("second transaction began %q, want RSET alone first", rset)
	}
}

// A pooled connection the relay closed while it sat idle, without a word,
// is found closed before the next message is written (which, chunked, the
// relay might otherwise have taken before the connection failed): the
// message goes out on a fresh connection with a single attempt.
func TestIdleConnectionClosedByRelayIsNotUsed(t *testing.T) {
	closed := make(chan struct{})
	began := make(chan string, 2) // each session's first command
	addr := sessions(t, 2, []string{"PIPELINING", "CHUNKING"}, func(i int, r *bufio.Reader, nc net.Conn) {
		cmds, _ := chunkedRelay(t, r, nc, "250 ok\r\n250 ok\r\n250 queued\r\n")
		began <- strings.Join(cmds[:min(len(cmds), 1)], "")
		if i == 0 {
			nc.Close()
			close(closed)
		}
	})
	p := newProvider(t, Config{Addr: addr, TLS: TLSNone, MaxAttempts: 1, PoolSize: 1, Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, from := range []string{"first@x.test", "second@x.test"} {
		if i == 1 {
			<-closed
			time.Sleep(20 * time.Millisecond) // the FIN crosses loopback
		}
		m := msg(from, "to@y.test")
		m.From = from
		if _, err := p.Send(ctx, m); err != nil {
			t.Fatalf("send from %s with one attempt: %v", from, err)
		}
	}
	first, second := <-began, <-began
	if !strings.Contains(first, "first@x.test") || !strings.Contains(second, "second@x.test") {
		t.Errorf("sessions began %q and %q, want the second message on a second connection", first, second)
	}
}
