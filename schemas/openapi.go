package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"strings"
)

// openapiFS holds the OpenAPI 3.1 sources: openapi/base.json (info, servers,
// security, shared components) and one fragment per feature under
// openapi/paths/*.json, each {"paths": {...}, "components": {...}} (optionally
// "tags": [...]). Feature teams add a fragment without touching anyone else's.
//
//go:embed openapi/base.json openapi/paths/*.json
var openapiFS embed.FS

// OpenAPI assembles the document served at GET {base_url}/v1/openapi.json:
// base.json with every fragment merged in file-name order, the `webhooks`
// section built from the webhook event catalogue (WebhookEvents), and the server
// URL set to siteURL + "/api". Paths are relative to that server
// ("/v1/me"). It fails when two fragments define the same operation, or the
// same component name with different content.
func OpenAPI(siteURL string) ([]byte, error) {
	var doc map[string]any
	raw, err := openapiFS.ReadFile("openapi/base.json")
	if err != nil {
		return nil, fmt.Errorf("openapi base: %w", err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("openapi base.json: %w", err)
	}
	names, err := fs.Glob(openapiFS, "openapi/paths/*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	paths := child(doc, "paths")
	comps := child(doc, "components")
	for _, name := range names {
		raw, err := openapiFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var frag map[string]any
		if err := json.Unmarshal(raw, &frag); err != nil {
			return nil, fmt.Errorf("openapi %s: %w", path.Base(name), err)
		}
		for k := range frag {
			if k != "paths" && k != "components" && k != "tags" {
				return nil, fmt.Errorf("openapi %s: unexpected top-level key %q (want paths, components, tags)", path.Base(name), k)
			}
		}
		fp, _ := frag["paths"].(map[string]any)
		for p, item := range fp {
			ops, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("openapi %s: path %s is not an object", path.Base(name), p)
			}
			dst := child(paths, p)
			for op, v := range ops {
				if _, dup := dst[op]; dup {
					return nil, fmt.Errorf("openapi %s: %s %s is defined twice", path.Base(name), strings.ToUpper(op), p)
				}
				dst[op] = v
			}
		}
		fc, _ := frag["components"].(map[string]any)
		for kind, v := range fc {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("openapi %s: components.%s is not an object", path.Base(name), kind)
			}
			dst := child(comps, kind)
			for n, def := range m {
				if old, dup := dst[n]; dup && !reflect.DeepEqual(old, def) {
					return nil, fmt.Errorf("openapi %s: components.%s.%s differs from an earlier definition", path.Base(name), kind, n)
				}
				dst[n] = def
			}
		}
		if tags, ok := frag["tags"].([]any); ok {
			old, _ := doc["tags"].([]any)
			doc["tags"] = append(old, tags...)
		}
	}
	if doc["webhooks"], err = webhooksSection(); err != nil {
		return nil, fmt.Errorf("openapi webhooks: %w", err)
	}
	doc["servers"] = []any{map[string]any{
		"url":         strings.TrimRight(siteURL, "/") + "/api",
		"description": "This deployment ({site_url}/api).",
	}}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi encode: %w", err)
	}
	// The OAuth flows' URLs (paths/oauth.json) are absolute: they name
	// "{site_url}" as whole JSON strings, filled in here.
	site := strings.TrimRight(siteURL, "/")
	for _, u := range []string{"/oauth/authorize", "/api/oauth/token"} {
		out = bytes.ReplaceAll(out, []byte(`"{site_url}`+u+`"`), []byte(`"`+site+u+`"`))
	}
	return out, nil
}

// child returns m[k] as an object, creating it when missing.
func child(m map[string]any, k string) map[string]any {
	c, ok := m[k].(map[string]any)
	if !ok {
		c = map[string]any{}
		m[k] = c
	}
	return c
}
