#!/usr/bin/env bash
# Try outgoing webhooks locally (README "Try webhooks locally"). Run it from
# the repo root in a second terminal while `make run` serves, started as
#
#   SENDSTREAM_WEBHOOK_ALLOW_PRIVATE=127.0.0.0/8 SENDSTREAM_WEBHOOK_INSECURE_TLS=1 make run
#
# It starts an https receiver on 127.0.0.1 with a self-signed certificate
# (deploy/webhookreceiver), creates a workspace and a dashboard endpoint for
# CONTACT_CREATED pointing at it with the admin CLI, upserts a contact over
# the API, and prints the delivery the receiver got (headers, body, whether
# the Standard Webhooks signature verifies) and the time from the upsert to
# its arrival. The receiver is stopped on exit; the server keeps running.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PATH=/usr/local/go/bin:$PATH
DATA=${SENDSTREAM_DATA_DIR:-.run}
SITE=${SENDSTREAM_SITE_URL:-http://127.0.0.1:8080}
WORK=$(mktemp -d)
RECEIVER_PID=
cleanup() {
	if [[ -n $RECEIVER_PID ]]; then
		kill "$RECEIVER_PID" 2>/dev/null || true
		wait "$RECEIVER_PID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
json_field() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }

curl -sf "$SITE/readyz" >/dev/null || {
	echo "nothing answers on $SITE: start the server first (see the top of $0)" >&2
	exit 1
}
[[ -x bin/sendstream ]] || make build

echo "1. receiver: https on 127.0.0.1, self-signed"
go build -o "$WORK/webhookreceiver" ./deploy/webhookreceiver
"$WORK/webhookreceiver" --addr-file "$WORK/addr" --secret-file "$WORK/secret" >"$WORK/deliveries.jsonl" &
RECEIVER_PID=$!
for _ in $(seq 100); do [[ -s $WORK/addr ]] && break; sleep 0.1; done
URL=$(cat "$WORK/addr")/hooks/sendstream
echo "   $URL"

echo "2. workspace and endpoint (admin CLI)"
WS_JSON=$(bin/sendstream admin workspace create --name "Try webhooks")
WS=$(json_field workspaceId <<<"$WS_JSON")
KEY=$(json_field apiKey <<<"$WS_JSON")
# The admin command checks the URL with the same rules as the server: the
# private range must be allowed for it too.
EP_JSON=$(SENDSTREAM_WEBHOOK_ALLOW_PRIVATE=127.0.0.0/8 bin/sendstream admin webhook-endpoint create \
	--workspace "$WS" --url "$URL" --events CONTACT_CREATED)
json_field secret <<<"$EP_JSON" >"$WORK/secret"
echo "   workspace $WS, endpoint $(json_field id <<<"$EP_JSON")"

echo "3. contact upsert"
T0=$(date +%s%N)
curl -s -X POST -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
	-d '{"email":"ada@example.com","firstName":"Ada"}' "$SITE/api/v1/contacts"
echo

echo "4. the delivery"
for _ in $(seq 300); do [[ -s $WORK/deliveries.jsonl ]] && break; sleep 0.1; done
if [[ ! -s $WORK/deliveries.jsonl ]]; then
	echo "   nothing arrived within 30 s: was make run started with both settings? (grep WEBHOOK in its log)" >&2
	exit 1
fi
LINE=$(head -n1 "$WORK/deliveries.jsonl")
if command -v python3 >/dev/null; then python3 -m json.tool <<<"$LINE"; else echo "$LINE"; fi
T1=$(sed -n 's/.*"receivedAtUnixNano":\([0-9]*\).*/\1/p' <<<"$LINE")
echo "upsert → delivery: $(((T1 - T0) / 1000000)) ms"
