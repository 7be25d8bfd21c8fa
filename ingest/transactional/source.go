package transactional

import (
	"sync"

	"github.com/buger/jsonparser"

	"sendstream/schemas"
)

// sourceCache remembers the HTML a workspace sends inline, keyed by the
// request's bytes for it (the JSON string still escaped): a send that
// repeats a source, as most do, neither decodes it nor encodes it again for
// the send envelope. Entries are per workspace, so how fast a source comes
// back says nothing about another workspace's. It holds at most max bytes
// and is emptied when full.
type sourceCache struct {
	mu    sync.Mutex
	byWS  map[string]map[string]*cachedSource
	bytes int
	max   int
}

// cachedSource is one source, decoded and encoded as a JSON string.
type cachedSource struct {
	text    string
	encoded []byte // schemas.AppendJSONString(nil, text)
}

// minCachedSource is the length under which a source is decoded each time.
const minCachedSource = 512

func newSourceCache(maxBytes int) *sourceCache { return &sourceCache{max: maxBytes} }

// get returns the source whose escaped JSON string content is raw, as sent
// by workspace ws; encoded is nil when it was not kept. A nil cache decodes
// every time.
func (c *sourceCache) get(ws string, raw []byte) (text string, encoded []byte, err error) {
	if c == nil || len(raw) < minCachedSource {
		text, err = jsonparser.ParseString(raw)
		return text, nil, err
	}
	c.mu.Lock()
	e := c.byWS[ws][string(raw)]
	c.mu.Unlock()
	if e != nil {
		return e.text, e.encoded, nil
	}
	if text, err = jsonparser.ParseString(raw); err != nil {
		return "", nil, err
	}
	e = &cachedSource{text: text, encoded: schemas.AppendJSONString(nil, text)}
	size := len(ws) + len(raw) + len(text) + len(e.encoded)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes+size > c.max {
		c.byWS, c.bytes = nil, 0
	}
	if size > c.max {
		return e.text, e.encoded, nil
	}
	if c.byWS == nil {
		c.byWS = map[string]map[string]*cachedSource{}
	}
	in := c.byWS[ws]
	if in == nil {
		in = map[string]*cachedSource{}
		c.byWS[ws] = in
	}
	in[string(raw)] = e // a copy: raw is part of the request body
	c.bytes += size
	return e.text, e.encoded, nil
}
