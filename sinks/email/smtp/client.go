package smtp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// ReplyError is a negative SMTP reply (4xx or 5xx): the relay answered and
// the connection is still usable.
type ReplyError struct {
	Code int
	Text string // the reply's text after the code, lines joined by "\n"
}

func (e *ReplyError) Error() string { return strconv.Itoa(e.Code) + " " + e.Text }

// client is one SMTP session on one connection: replies, EHLO extensions,
// STARTTLS, AUTH PLAIN, and mail transactions with the commands pipelined
// (RFC 2920) when the relay offers it. It is not safe for concurrent use.
type client struct {
	nc      net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	ext     map[string]string // EHLO keywords (upper case) and their parameters
	timeout time.Duration     // bounds each exchange
	hdr     []byte            // scratch: commands
	msg     []byte            // scratch: the message as sent (dot-stuffed, or a BDAT chunk)
}

func newClient(nc net.Conn, timeout time.Duration) *client {
	return &client{nc: nc, r: bufio.NewReader(nc), w: bufio.NewWriter(nc), timeout: timeout}
}

// deadline bounds the next exchange.
func (c *client) deadline() { _ = c.nc.SetDeadline(time.Now().Add(c.timeout)) }

// reply reads one (possibly multi-line) reply.
func (c *client) reply() (int, string, error) {
	var text strings.Builder
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return 0, "", errors.New("smtp: reply line too long")
			}
			return 0, "", fmt.Errorf("smtp: read reply: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) < 3 || !isDigits(line[:3]) || (len(line) > 3 && line[3] != ' ' && line[3] != '-') {
			return 0, "", fmt.Errorf("smtp: malformed reply %q", line)
		}
		code := int(line[0]-'0')*100 + int(line[1]-'0')*10 + int(line[2]-'0')
		if text.Len() > 0 {
			text.WriteByte('\n')
		}
		if len(line) > 4 {
			text.Write(line[4:])
		}
		if len(line) == 3 || line[3] == ' ' {
			return code, text.String(), nil
		}
	}
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// expect reads a reply and turns a code that does not match want into a
// *ReplyError. As with net/textproto, want may be a prefix: 2 accepts any
// 2xx, 25 any 25x (RCPT may answer 251, "will forward").
func (c *client) expect(want int) (string, error) {
	code, text, err := c.reply()
	if err != nil {
		return "", err
	}
	if !codeMatches(code, want) {
		return text, &ReplyError{Code: code, Text: text}
	}
	return text, nil
}

func codeMatches(code, want int) bool {
	switch {
	case want < 10:
		return code/100 == want
	case want < 100:
		return code/10 == want
	}
	return code == want
}

// cmd sends one command line and reads its reply.
func (c *client) cmd(want int, line string) (string, error) {
	c.deadline()
	c.w.WriteString(line)
	c.w.WriteString("\r\n")
	if err := c.w.Flush(); err != nil {
		return "", fmt.Errorf("smtp: write: %w", err)
	}
	return c.expect(want)
}

// greet reads the relay's 220 greeting and says EHLO (HELO when EHLO is
// not understood).
func (c *client) greet(name string) error {
	c.deadline()
	if _, err := c.expect(220); err != nil {
		return fmt.Errorf("greeting: %w", err)
	}
	return c.hello(name)
}

// hello sends EHLO and records the extensions; a relay that rejects EHLO
// gets HELO and is used without extensions.
func (c *client) hello(name string) error {
	text, err := c.cmd(25, "EHLO "+name)
	if replyCode(err)/100 == 5 {
		c.ext = map[string]string{}
		if _, err := c.cmd(25, "HELO "+name); err != nil {
			return fmt.Errorf("helo: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("ehlo: %w", err)
	}
	c.ext = map[string]string{}
	lines := strings.Split(text, "\n")
	for _, l := range lines[1:] { // the first line is the relay's name
		k, v, _ := strings.Cut(l, " ")
		c.ext[strings.ToUpper(k)] = v
	}
	return nil
}

func (c *client) has(ext string) bool {
	_, ok := c.ext[ext]
	return ok
}

// startTLS upgrades the connection and says EHLO again (RFC 3207: the
// extensions may differ once secured).
func (c *client) startTLS(ctx context.Context, cfg *tls.Config, name string) error {
	if _, err := c.cmd(220, "STARTTLS"); err != nil {
		return fmt.Errorf("starttls: %w", err)
	}
	tc := tls.Client(c.nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("tls handshake: %w", err)
	}
	c.nc = tc
	c.r.Reset(tc)
	c.w.Reset(tc)
	return c.hello(name)
}

// auth authenticates with AUTH PLAIN (RFC 4616), the initial response sent
// with the command.
func (c *client) auth(user, pass string) error {
	if !c.has("AUTH") {
		return errors.New("auth: the relay offers no AUTH")
	}
	ir := base64.StdEncoding.EncodeToString([]byte("\x00" + user + "\x00" + pass))
	if _, err := c.cmd(235, "AUTH PLAIN "+ir); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}

// reset aborts an unfinished transaction.
func (c *client) reset() error {
	if _, err := c.cmd(25, "RSET"); err != nil {
		return fmt.Errorf("rset: %w", err)
	}
	return nil
}

// quit ends the session politely; the caller closes the connection.
func (c *client) quit() {
	_, _ = c.cmd(221, "QUIT")
}

// minSendRate is the slowest transmission (bytes per second) a message's
// write is given time for, on top of the exchange time-out.
const minSendRate = 64 << 10

// stage says where a transaction stopped.
type stage int

const (
	stageEnvelope stage = iota // MAIL, the primary RCPT or DATA: nothing accepted
	stageBody                  // writing the message: nothing accepted
	stageFinal                 // the reply to the end of data
	stageAborted               // the primary recipient was refused after DATA was accepted: the connection must close
)

// outcome is the result of one transaction.
type outcome struct {
	stage   stage
	err     error    // nil: accepted; a *ReplyError when the relay answered
	final   string   // the text of the final reply
	refused []string // secondary recipients the relay refused
	step    string   // the command err answers
}

// send runs one transaction (as SMTPUTF8 when utf8 is set). With one recipient and a relay offering
// CHUNKING and PIPELINING it is sendChunked, one round trip; otherwise MAIL,
// RCPT for each recipient and DATA, written in one go when the relay offers
// PIPELINING, then the message in one write. The first recipient is the
// primary one: when the relay refuses it, nothing is sent (if DATA was
// already accepted, stageAborted tells the caller to drop the connection,
// which abandons the transaction).
func (c *client) send(from string, rcpts []string, raw []byte, utf8 bool) outcome {
	if len(rcpts) == 1 && c.has("CHUNKING") && c.has("PIPELINING") {
		return c.sendChunked(from, rcpts[0], raw, utf8)
	}
	c.deadline()
	pipelined := c.has("PIPELINING")
	c.hdr = c.appendMail(c.hdr[:0], from, len(raw), utf8)
	c.w.Write(c.hdr)
	if !pipelined {
		if o, ok := c.step("mail from", 25); !ok {
			return o
		}
	}
	var o outcome
	primaryOK := true
	for i, r := range rcpts {
		c.w.WriteString("RCPT TO:<")
		c.w.WriteString(r)
		c.w.WriteString(">\r\n")
		if pipelined {
			continue
		}
		if o2, ok := c.step("rcpt to "+r, 25); !ok {
			if !isReply(o2.err) || i == 0 {
				return o2
			}
			o.refused = append(o.refused, r)
		}
	}
	c.w.WriteString("DATA\r\n")
	if err := c.w.Flush(); err != nil {
		return outcome{stage: stageEnvelope, step: "data", err: fmt.Errorf("write: %w", err)}
	}
	if pipelined {
		if o2, ok := c.read("mail from", 25); !ok {
			if isReply(o2.err) && c.drain(len(rcpts)+1) {
				o2.stage = stageAborted // a relay that took DATA anyway
			}
			return o2
		}
		for i, r := range rcpts {
			o2, ok := c.read("rcpt to "+r, 25)
			switch {
			case ok:
			case !isReply(o2.err):
				return o2
			case i == 0:
				primaryOK, o = false, o2
			default:
				o.refused = append(o.refused, r)
			}
		}
	}
	o2, dataOK := c.read("data", 354)
	switch {
	case !dataOK && !isReply(o2.err):
		return o2 // the connection broke
	case !dataOK && !primaryOK:
		return o // the primary refusal explains the rest
	case !dataOK:
		return o2
	case !primaryOK:
		o.stage = stageAborted
		return o
	}
	c.msg = appendLines(c.msg[:0], raw, true)
	c.sendDeadline(len(c.msg))
	if _, err := c.nc.Write(c.msg); err != nil {
		return outcome{stage: stageBody, step: "write message", err: err, refused: o.refused}
	}
	c.deadline() // the relay's own time to take the message
	text, err := c.expect(2)
	return outcome{stage: stageFinal, step: "end of data", final: text, refused: o.refused, err: err}
}

// sendChunked writes MAIL, RCPT, "BDAT <size> LAST" and the message in one
// write (RFC 3030 with RFC 2920) and then reads the three replies. A relay
// that refuses MAIL or RCPT refuses the BDAT too and drops its chunk, so the
// session stays in step. Once the write went out, the relay may hold the
// whole message: a reply lost after it is an unknown outcome (stageFinal
// with no reply), which is why the pool checks a reused connection before
// handing it out (peerClosed).
func (c *client) sendChunked(from, rcpt string, raw []byte, utf8 bool) outcome {
	c.msg = appendLines(c.msg[:0], raw, false)
	b := c.appendMail(c.hdr[:0], from, len(c.msg), utf8)
	b = append(b, "RCPT TO:<"...)
	b = append(b, rcpt...)
	b = append(b, ">\r\nBDAT "...)
	b = strconv.AppendInt(b, int64(len(c.msg)), 10)
	c.hdr = append(b, " LAST\r\n"...)
	c.sendDeadline(len(c.hdr) + len(c.msg))
	bufs := net.Buffers{c.hdr, c.msg} // one writev on a TCP connection
	if _, err := bufs.WriteTo(c.nc); err != nil {
		return outcome{stage: stageBody, step: "write message", err: err}
	}
	c.deadline() // the relay's own time to take the message
	if _, err := c.expect(25); err != nil {
		return c.refusedBefore(outcome{stage: stageEnvelope, step: "mail from", err: err}, 2)
	}
	if _, err := c.expect(25); err != nil {
		return c.refusedBefore(outcome{stage: stageEnvelope, step: "rcpt to " + rcpt, err: err}, 1)
	}
	text, err := c.expect(2)
	return outcome{stage: stageFinal, step: "end of data", final: text, err: err}
}

// sendDeadline bounds the write of n bytes: a large message may take longer
// than one exchange to transmit, so the write gets the time-out plus a
// second per minSendRate bytes.
func (c *client) sendDeadline(n int) {
	_ = c.nc.SetDeadline(time.Now().Add(c.timeout + time.Duration(n/minSendRate)*time.Second))
}

// refusedBefore is the outcome of a chunked transaction whose MAIL or RCPT
// got o.err, with n replies still to come. A reply means nothing was
// accepted: the rest are read to stay in step. A lost connection may have
// come after the relay took the message (stageFinal, no reply).
func (c *client) refusedBefore(o outcome, n int) outcome {
	if !isReply(o.err) {
		o.stage = stageFinal
		return o
	}
	c.drain(n)
	return o
}

// appendMail appends the MAIL FROM command for a message of size bytes;
// utf8 adds the SMTPUTF8 parameter (RFC 6531 3.4), which the caller sends
// only to a relay offering the extension.
func (c *client) appendMail(b []byte, from string, size int, utf8 bool) []byte {
	b = append(b, "MAIL FROM:<"...)
	b = append(b, from...)
	b = append(b, '>')
	if c.has("8BITMIME") {
		b = append(b, " BODY=8BITMIME"...)
	}
	if utf8 {
		b = append(b, " SMTPUTF8"...)
	}
	if c.has("SIZE") {
		b = append(b, " SIZE="...)
		b = strconv.AppendInt(b, int64(size), 10)
	}
	return append(b, "\r\n"...)
}

// step flushes the commands written so far and reads one reply.
func (c *client) step(name string, want int) (outcome, bool) {
	if err := c.w.Flush(); err != nil {
		return outcome{stage: stageEnvelope, step: name, err: fmt.Errorf("write: %w", err)}, false
	}
	return c.read(name, want)
}

// read reads the reply to the named command of the envelope.
func (c *client) read(name string, want int) (outcome, bool) {
	_, err := c.expect(want)
	return outcome{stage: stageEnvelope, step: name, err: err}, err == nil
}

// drain reads n pipelined replies whose outcome no longer matters, so the
// session stays in step; it stops at a network error. It reports whether
// the last one was 354: the relay waits for data, so the connection must
// be dropped.
func (c *client) drain(n int) bool {
	code := 0
	for range n {
		var err error
		if code, _, err = c.reply(); err != nil {
			return false
		}
	}
	return code == 354
}

// replyCode is the code of the *ReplyError in err, or 0 when err is not
// the relay's answer (nil, or a network failure).
func replyCode(err error) int {
	var re *ReplyError
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

func isReply(err error) bool { return replyCode(err) != 0 }

// appendLines appends raw with every line ending in CRLF (a bare LF becomes
// CRLF). As DATA content (RFC 5321 4.5.2, dot), a line starting with "."
// gets another one and the content ends with the "." line; a BDAT chunk
// (RFC 3030) is sent as it is.
func appendLines(dst, raw []byte, dot bool) []byte {
	for len(raw) > 0 {
		if dot && raw[0] == '.' {
			dst = append(dst, '.')
		}
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			dst = append(dst, raw...)
			dst = append(dst, '\r', '\n')
			break
		}
		if i > 0 && raw[i-1] == '\r' {
			dst = append(dst, raw[:i+1]...)
		} else {
			dst = append(dst, raw[:i]...)
			dst = append(dst, '\r', '\n')
		}
		raw = raw[i+1:]
	}
	if dot {
		dst = append(dst, '.', '\r', '\n')
	}
	return dst
}
