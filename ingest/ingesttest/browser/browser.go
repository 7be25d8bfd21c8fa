// Package browser drives a headless Chromium (Debian's chromium, the
// flags of DESIGN.md's Browser row) for tests, over the Chrome DevTools
// Protocol on a pipe: no WebSocket client or driver package is needed.
package browser

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Browser drives a headless Chromium over the DevTools protocol on a pipe
// (--remote-debugging-pipe: commands on fd 3, answers and events on fd 4,
// each a JSON message ended by a NUL byte), so no WebSocket client or
// driver package is needed.
type Browser struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	mu   sync.Mutex
	next int
	wait map[int]chan cdpMsg
	evMu sync.Mutex
	evs  []cdpMsg
	evC  chan struct{}
	done chan struct{}
}

type cdpMsg struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// chromiumPath finds the browser: $CHROMIUM, else Debian's package.
func chromiumPath(t testing.TB) string {
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/lib/chromium/chromium"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found: install it with deploy/stack.sh install (Debian package chromium) or set CHROMIUM")
	return ""
}

// Launch starts a headless Chromium with a fresh profile; it is stopped
// when the test ends.
func Launch(t testing.TB) *Browser {
	t.Helper()
	cmdR, cmdW, err := os.Pipe() // we write commands, Chromium reads fd 3
	if err != nil {
		t.Fatal(err)
	}
	evR, evW, err := os.Pipe() // Chromium writes fd 4, we read
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(chromiumPath(t),
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, evW}
	cmd.Stdout = io.Discard
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	cmdR.Close()
	evW.Close()
	b := &Browser{cmd: cmd, in: cmdW, wait: map[int]chan cdpMsg{}, evC: make(chan struct{}, 1), done: make(chan struct{})}
	go b.read(evR)
	t.Cleanup(func() {
		cmdW.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-b.done
	})
	return b
}

func (b *Browser) read(r io.Reader) {
	defer close(b.done)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMsg
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		if m.ID != 0 {
			b.mu.Lock()
			c := b.wait[m.ID]
			delete(b.wait, m.ID)
			b.mu.Unlock()
			if c != nil {
				c <- m
			}
			continue
		}
		b.evMu.Lock()
		b.evs = append(b.evs, m)
		b.evMu.Unlock()
		select {
		case b.evC <- struct{}{}:
		default:
		}
	}
}

// call sends one command (on a session when session != "") and waits for
// its answer.
func (b *Browser) call(t testing.TB, session, method string, params any, out any) {
	t.Helper()
	b.mu.Lock()
	b.next++
	id := b.next
	c := make(chan cdpMsg, 1)
	b.wait[id] = c
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, _ := json.Marshal(msg)
	if _, err := b.in.Write(append(raw, 0)); err != nil {
		t.Fatalf("cdp %s: write: %v", method, err)
	}
	select {
	case m := <-c:
		if m.Error != nil {
			t.Fatalf("cdp %s: %s", method, m.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				t.Fatalf("cdp %s: decode %s: %v", method, m.Result, err)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("cdp %s: no answer", method)
	}
}

// waitEvent waits for an event of method on session that matches (nil
// matches any), consuming it and the events before it.
func (b *Browser) waitEvent(t testing.TB, session, method string, timeout time.Duration) cdpMsg {
	t.Helper()
	deadline := time.After(timeout)
	for {
		b.evMu.Lock()
		for i, m := range b.evs {
			if m.Method == method && m.SessionID == session {
				b.evs = b.evs[i+1:]
				b.evMu.Unlock()
				return m
			}
		}
		b.evMu.Unlock()
		select {
		case <-b.evC:
		case <-deadline:
			t.Fatalf("cdp: no %s event within %s", method, timeout)
		}
	}
}

// events returns (and forgets) every event of method seen on session.
func (b *Browser) events(session, method string) []cdpMsg {
	b.evMu.Lock()
	defer b.evMu.Unlock()
	var out, keep []cdpMsg
	for _, m := range b.evs {
		if m.Method == method && m.SessionID == session {
			out = append(out, m)
		} else {
			keep = append(keep, m)
		}
	}
	b.evs = keep
	return out
}

// Page is one tab.
type Page struct {
	b       *Browser
	session string
}

// NewPage opens a tab on about:blank.
func (b *Browser) NewPage(t testing.TB) *Page {
	t.Helper()
	var created struct {
		TargetID string `json:"targetId"`
	}
	b.call(t, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &created)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	b.call(t, "", "Target.attachToTarget", map[string]any{"targetId": created.TargetID, "flatten": true}, &att)
	p := &Page{b: b, session: att.SessionID}
	b.call(t, p.session, "Page.enable", map[string]any{}, nil)
	b.call(t, p.session, "Runtime.enable", map[string]any{}, nil)
	return p
}

// Navigate loads url and waits for its load event.
func (p *Page) Navigate(t testing.TB, url string) {
	t.Helper()
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	p.b.call(t, p.session, "Page.navigate", map[string]any{"url": url}, &nav)
	if nav.ErrorText != "" {
		t.Fatalf("navigate %s: %s", url, nav.ErrorText)
	}
	p.b.waitEvent(t, p.session, "Page.loadEventFired", 30*time.Second)
}

// Eval evaluates a JavaScript expression (awaiting a promise) and decodes
// its JSON value into out.
func (p *Page) Eval(t testing.TB, expr string, out any) {
	t.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	p.b.call(t, p.session, "Runtime.evaluate", map[string]any{
		"expression": expr, "awaitPromise": true, "returnByValue": true,
	}, &res)
	if res.ExceptionDetails != nil {
		t.Fatalf("eval %s: %s %s", expr, res.ExceptionDetails.Text, res.ExceptionDetails.Exception.Description)
	}
	if out != nil {
		if err := json.Unmarshal(res.Result.Value, out); err != nil {
			t.Fatalf("eval %s: decode %s: %v", expr, res.Result.Value, err)
		}
	}
}

// Exceptions returns the uncaught exceptions the page reported.
func (p *Page) Exceptions() []string {
	var out []string
	for _, m := range p.b.events(p.session, "Runtime.exceptionThrown") {
		out = append(out, string(m.Params))
	}
	return out
}

// Submit evaluates expr, which must start a navigation (a click on a
// form's submit button, form.requestSubmit()), and waits for the new
// page's load event.
func (p *Page) Submit(t testing.TB, expr string) {
	t.Helper()
	p.Eval(t, expr, nil)
	p.b.waitEvent(t, p.session, "Page.loadEventFired", 30*time.Second)
}

// Screenshot returns a PNG of the page's whole document (for looking at a
// page while writing a test; tests assert on the DOM, not on pixels).
func (p *Page) Screenshot(t testing.TB) []byte {
	t.Helper()
	var shot struct {
		Data []byte `json:"data"` // base64 in JSON: decoded by encoding/json
	}
	p.b.call(t, p.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &shot)
	return shot.Data
}
