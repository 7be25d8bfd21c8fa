#!/usr/bin/env bash
# Vendor the dashboard's JavaScript (issue 27 item 3): htmx 2 and uPlot, at
# the pinned versions below, fetched with `npm pack` from the registry npm
# is configured with, checked against the pinned integrity, and copied with
# their licences into ingest/dashboard/static/ (embedded in the binary and
# served at /static/...). Run it from anywhere after changing a version or
# an integrity value, then commit the files it writes:
#
#   deploy/vendor-dashboard.sh
#
# Nothing is installed and nothing outside the temporary directory and
# ingest/dashboard/static/ is written.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT="$ROOT/ingest/dashboard/static"

# name version integrity (as `npm pack --json` reports it)
PACKAGES=(
	"htmx.org 2.0.11 sha512-Thx/WtpeOQqSrqBCw/A1cwGJGg4UrVa3+sW0GmrM3p4gJgO89ecH4qtbnyzDDWFvBTqjnIMCgELTNt636dtamA=="
	"uplot 1.6.32 sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw=="
)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

for p in "${PACKAGES[@]}"; do
	read -r name version integrity <<<"$p"
	(cd "$WORK" && npm pack --silent "$name@$version" >/dev/null)
	tgz="$WORK/$name-$version.tgz"
	got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
	if [[ "$got" != "$integrity" ]]; then
		echo "vendor-dashboard: $name@$version integrity $got, want $integrity" >&2
		exit 1
	fi
	mkdir -p "$WORK/$name"
	tar -xzf "$tgz" -C "$WORK/$name"
done

mkdir -p "$OUT"
cp "$WORK/htmx.org/package/dist/htmx.min.js" "$OUT/htmx.min.js"
cp "$WORK/htmx.org/package/LICENSE" "$OUT/htmx.LICENSE.txt"
cp "$WORK/uplot/package/dist/uPlot.iife.min.js" "$OUT/uPlot.iife.min.js"
cp "$WORK/uplot/package/dist/uPlot.min.css" "$OUT/uPlot.min.css"
cp "$WORK/uplot/package/LICENSE" "$OUT/uPlot.LICENSE.txt"
{
	echo "Vendored by deploy/vendor-dashboard.sh; do not edit by hand."
	for p in "${PACKAGES[@]}"; do echo "$p"; done
} >"$OUT/VERSIONS.txt"
(cd "$OUT" && sha256sum htmx.min.js uPlot.iife.min.js uPlot.min.css)
