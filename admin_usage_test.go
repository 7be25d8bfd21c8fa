package main

import (
	"bytes"
	"context"
	"testing"
)

// TestAdminUsage pins the list of admin commands and their flags as the
// operator sees it (DESIGN.md, "The operator interface"): features declare
// their commands beside their code and features.go lists them, so a
// command lost or renamed on the way shows here.
func TestAdminUsage(t *testing.T) {
	const want = `usage: sendstream admin <command> [flags]; output is one JSON object
  analytics --workspace W --report events-per-day|revenue-per-day|unique-contacts [--from RFC3339|YYYY-MM-DD] [--to RFC3339|YYYY-MM-DD]
  apikey create --workspace W [--scopes a,b] [--expires-at RFC3339] [--name N]
  apikey delete --workspace W --id K
  custom-field create --workspace W --key K [--type string|number|boolean|date]
  domain add --workspace W --domain example.com [--selector S] [--no-dkim]
  journey activate --workspace W --id J
  journey archive --workspace W --id J
  journey create --workspace W --file J.json
  journey executions --workspace W --id J [--state S] [--limit N]
  journey pause --workspace W --id J
  journey stats --workspace W --id J
  journey update --workspace W --id J --file J.json
  list create --workspace W --name N [--double-opt-in]
  member create --workspace W --email E --password P --role owner|admin|member|custom|support [--permissions a,b]
  oauth-app create --workspace W --name N --type confidential|public --grants authorization_code,client_credentials,refresh_token --scopes a,b [--redirect-uri U]… [--created-by MEMBER]
  oauth-app delete --workspace W --id A
  oauth-app rotate-secret --workspace W --id A
  requests --workspace W [--since RFC3339] [--limit N]
  send-policy create --workspace W --key K --kind transactional|marketing [--from-email E] [--from-name N] [--provider smtp]
  template create --workspace W --file T.json
  template update --workspace W --id T --file T.json
  tracking-token create --workspace W [--domains a.com,b.com]
  webhook deliveries --workspace W [--endpoint E] [--event T] [--status ok|failed] [--limit N]
  webhook replay --workspace W (--message M | --endpoint E --since RFC3339)
  webhook-endpoint create --workspace W --url U --events A,B [--secret S]
  webhook-endpoint delete --workspace W --id E
  webhook-endpoint disable --workspace W --id E
  webhook-endpoint enable --workspace W --id E
  webhook-endpoint list --workspace W
  webhook-endpoint rotate-secret --workspace W --id E
  workspace create --name N [--plan free|pro|enterprise] [--contact-limit N] [--rate-multiplier N]
  workspace resume --workspace W
  workspace suspend --workspace W`
	var out, errOut bytes.Buffer
	err := runAdmin(context.Background(), nil, &out, &errOut)
	if err == nil || err.Error() != "admin: missing command" || out.Len() != 0 {
		t.Fatalf("admin without a command: err %v, stdout %q", err, out.String())
	}
	if got := errOut.String(); got != want+"\n" {
		t.Fatalf("admin usage:\n%s\nwant:\n%s", got, want)
	}
}
