package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sendstream/deploy/stack"
	"sendstream/ingest/transactional"
)

// TestAdminTransactional: domain add (with a DKIM key and its DNS record),
// send-policy create (kinds, owned sender domain, duplicate keys), template
// create and update from the documented file format (the example file).
func TestAdminTransactional(t *testing.T) {
	pg := stack.PG(t)
	ctx := context.Background()
	ws := mustAdmin(t, "workspace", "create", "--name", "Tx Admin")["workspaceId"].(string)

	d := mustAdmin(t, "domain", "add", "--workspace", ws, "--domain", "Shop.Example.COM", "--selector", "s2025")
	if d["domain"] != "shop.example.com" || d["selector"] != "s2025" || d["dkim"] != true ||
		d["dkimRecordName"] != "s2025._domainkey.shop.example.com" || !strings.HasPrefix(d["dkimRecord"].(string), "v=DKIM1; k=rsa; p=") {
		t.Fatalf("domain add: %v", d)
	}
	if again := mustAdmin(t, "domain", "add", "--workspace", ws, "--domain", "shop.example.com"); again["dkimRecord"] != d["dkimRecord"] {
		t.Error("adding the domain again replaced its key")
	}
	if _, err := admin(t, "domain", "add", "--workspace", ws, "--domain", "not a domain"); err == nil {
		t.Error("bad domain accepted")
	}

	p := mustAdmin(t, "send-policy", "create", "--workspace", ws, "--key", "newsletter", "--kind", "marketing", "--from-email", "news@shop.example.com", "--from-name", "Shop")
	if p["key"] != "newsletter" || p["id"] == "" {
		t.Fatalf("send-policy create: %v", p)
	}
	look, err := transactional.NewStore(pg).Lookup(ctx, ws, transactional.LookupInput{Email: "x@y.test", Addresses: []string{"x@y.test"}, PolicyRef: "newsletter"})
	if err != nil || look.Policy == nil || look.Policy.Kind != "marketing" || look.Policy.FromEmail != "news@shop.example.com" || look.Policy.ID != p["id"] {
		t.Fatalf("stored policy: %+v %v", look.Policy, err)
	}
	for _, bad := range [][]string{
		{"--key", "newsletter", "--kind", "marketing"},                               // duplicate
		{"--key", "x", "--kind", "bulk"},                                             // kind
		{"--key", "x", "--kind", "transactional", "--from-email", "a@not-ours.test"}, // domain
		{"--key", "Bad Key", "--kind", "transactional"},                              // key
	} {
		if _, err := admin(t, append([]string{"send-policy", "create", "--workspace", ws}, bad...)...); err == nil {
			t.Errorf("send-policy create %v accepted", bad)
		}
	}

	example := filepath.Join("deploy", "examples", "template.json")
	tm := mustAdmin(t, "template", "create", "--workspace", ws, "--file", example)
	id, _ := tm["id"].(string)
	tpl, err := transactional.NewStore(pg).Template(ctx, ws, id)
	if err != nil || tpl.Name != "Order receipt" || len(tpl.Required) != 3 || tpl.Translations["de"].Subject == "" || tpl.Version != 1 {
		t.Fatalf("stored template: %+v %v", tpl, err)
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	up := mustAdmin(t, "template", "update", "--workspace", ws, "--id", id, "--file", write("v2.json", `{"subject":"v2 {{ x }}","html":"<p>v2</p>"}`))
	if up["version"] != float64(2) {
		t.Errorf("template update: %v", up)
	}
	for name, body := range map[string]string{
		"broken.json":  `{"subject":"Hi {% if %}","html":"x"}`,
		"unknown.json": `{"subject":"s","html":"h","colour":"red"}`,
		"nohtml.json":  `{"subject":"s"}`,
		"badvar.json":  `{"subject":"s","html":"h","requiredVariables":["a b"]}`,
		"badlang.json": `{"subject":"s","html":"h","translations":{"not a tag!":{"subject":"x"}}}`,
		"badtr.json":   `{"subject":"s","html":"h","translations":{"de":{"html":"{% for %}"}}}`,
	} {
		if _, err := admin(t, "template", "create", "--workspace", ws, "--file", write(name, body)); err == nil {
			t.Errorf("template file %s accepted", name)
		}
	}
	if _, err := admin(t, "template", "create", "--workspace", "no-such-ws", "--file", example); err == nil {
		t.Error("template for an unknown workspace accepted")
	}
}
