package schemas

import "sync"

// SourceCache keeps long JSON strings (the Liquid sources of sends) decoded,
// per workspace, keyed by their still-escaped bytes: a send that repeats a
// source, as most do, is not decoded again. Entries are per workspace, so
// how fast a source comes back says nothing about another workspace's. It
// holds at most max bytes and is emptied when full. Safe for concurrent use;
// a nil cache decodes every time.
type SourceCache struct {
	encode bool // keep AppendJSONString of each text too
	mu     sync.Mutex
	byWS   map[string]map[string]*cachedSource
	bytes  int
	max    int
}

// cachedSource is one source, decoded (and encoded as a JSON string when
// the cache keeps encodings).
type cachedSource struct {
	text    string
	encoded []byte
}

// MinCachedSource is the length under which a source is decoded each time.
const MinCachedSource = 512

// NewSourceCache returns a cache of at most maxBytes; with encode it also
// keeps each text as AppendJSONString writes it.
func NewSourceCache(maxBytes int, encode bool) *SourceCache {
	return &SourceCache{max: maxBytes, encode: encode}
}

// Get returns the text that decode makes of raw, sent by workspace ws, and
// its JSON encoding when the cache keeps encodings (nil when raw is not
// kept). decode must be a pure function of raw.
func (c *SourceCache) Get(ws string, raw []byte, decode func([]byte) (string, error)) (text string, encoded []byte, err error) {
	if c == nil || len(raw) < MinCachedSource {
		text, err = decode(raw)
		return text, nil, err
	}
	c.mu.Lock()
	e := c.byWS[ws][string(raw)]
	c.mu.Unlock()
	if e != nil {
		return e.text, e.encoded, nil
	}
	if text, err = decode(raw); err != nil {
		return "", nil, err
	}
	e = &cachedSource{text: text}
	if c.encode {
		e.encoded = AppendJSONString(nil, text)
	}
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
	in[string(raw)] = e // a copy: raw belongs to the caller
	c.bytes += size
	return e.text, e.encoded, nil
}
