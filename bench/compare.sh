#!/usr/bin/env bash
# compare.sh: alternate two sendstream binaries, one benchmark pair at a time,
# so that both builds meet the same machine noise (PERFORMANCE.md's rule:
# compare only ratios measured in the same run).
#
#   bench/compare.sh OLD_BIN [NEW_BIN] [BENCHMARKS] [ROUNDS]
#
# OLD_BIN  the binary to compare against (e.g. built from an older commit:
#          git worktree add /tmp/old <commit> && (cd /tmp/old && go build -o /tmp/sendstream-old .))
# NEW_BIN  default: bin/sendstream built from this tree
# BENCHMARKS  comma-separated names (default: every non-manual benchmark)
# ROUNDS   default 3; each round runs every benchmark once with each binary,
#          old first in odd rounds and new first in even ones
#
# Every run is `go run ./bench -run NAME -pairs 1 -bin BIN` (extra flags go
# in BENCH_ARGS, e.g. BENCH_ARGS="-duration 5s"). The table printed at the
# end gives, per benchmark and round, each binary's ratio to the baseline
# measured in its run, new/old of those ratios, new/old of the system's
# raw rate (not divided by a baseline: on this shared host the bare
# baseline itself moves by a third between runs, and that noise is half of
# a ratio's), and new/old of the server+broker CPU µs per operation; then
# each column's median over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: bench/compare.sh OLD_BIN [NEW_BIN] [BENCHMARKS] [ROUNDS]}
new=${2:-}
names=${3:-contacts,events,events-import,me,transactional-send,transactional-e2e,transactional-e2e-dkim}
rounds=${4:-3}
if [[ -z $new ]]; then
	go build -o bin/sendstream .
	new=bin/sendstream
fi
harness=$(mktemp -d)/bench
go build -o "$harness" ./bench
log=bench/results/compare-$(date -u +%Y%m%dT%H%M%SZ).log
mkdir -p bench/results
echo "old=$old new=$new rounds=$rounds benchmarks=$names" | tee "$log"

# run NAME BIN LABEL ROUND: one run; appends "NAME ROUND LABEL RATIO CPU" to the log.
run() {
	local line ratio cpu rate json exact
	line=$("$harness" -run "$1" -pairs 1 -bin "$2" ${BENCH_ARGS:-} 2>&1 | grep -E "^$1: " | tail -1 || true)
	ratio=$(grep -oE 'ratio [0-9.]+' <<<"$line" | head -1 | cut -d' ' -f2 || true)
	# The line rounds the ratio to two digits, ±4% at transactional-send's
	# 0.12: take the report's ratio (three digits) from the JSON result.
	json=$(grep -oE '[^ ]+\.json$' <<<"$line" || true)
	if [[ -n $json && -f $json ]]; then
		exact=$(grep -E '^  "ratio": ' "$json" | grep -oE '[0-9.]+' | head -1 || true)
		ratio=${exact:-$ratio}
	fi
	cpu=$(grep -oE 'server\+broker [0-9.]+' <<<"$line" | head -1 | cut -d' ' -f2 || true)
	# "system 5.7k vs ...": the system's rate, k and M expanded.
	rate=$(grep -oE 'system [0-9.]+[kM]? ' <<<"$line" | head -1 | awk '{v = $2; m = 1; if (v ~ /k$/) m = 1e3; if (v ~ /M$/) m = 1e6; sub(/[kM]$/, "", v); print v * m}' || true)
	echo "# $3 round $4: $line" | tee -a "$log"
	echo "$1 $4 $3 ${ratio:-NA} ${cpu:-NA} ${rate:-NA}" >>"$log.rows"
}

for ((r = 1; r <= rounds; r++)); do
	for n in ${names//,/ }; do
		if ((r % 2)); then
			run "$n" "$old" old "$r"
			run "$n" "$new" new "$r"
		else
			run "$n" "$new" new "$r"
			run "$n" "$old" old "$r"
		fi
	done
done

echo | tee -a "$log"
printf "%-24s %5s %9s %9s %9s %11s %11s\n" benchmark round "old ratio" "new ratio" new/old "rate n/o" "cpu n/o" | tee -a "$log"
awk '
	function div(a, b) { return (a != "NA" && b != "NA" && b > 0) ? sprintf("%.3f", a / b) : "NA" }
	{ k = $1 " " $2; if ($3 == "old") { ro[k] = $4; co[k] = $5; so[k] = $6 } else { rn[k] = $4; cn[k] = $5; sn[k] = $6 }; keys[k] = 1 }
	END {
		for (k in keys) {
			split(k, p, " ")
			printf "%-24s %5s %9s %9s %9s %11s %11s\n", p[1], p[2], ro[k], rn[k], div(rn[k], ro[k]), div(sn[k], so[k]), div(cn[k], co[k])
		}
	}' "$log.rows" | sort >"$log.table"
tee -a "$log" <"$log.table"
# Medians per benchmark of the three new/old columns (NA rounds left out).
awk '
	function median(list,    v, n, i, j, t) {
		n = split(list, v, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
		if (n == 0) return "NA"
		return (n % 2) ? v[(n + 1) / 2] : sprintf("%.3f", (v[n / 2] + v[n / 2 + 1]) / 2)
	}
	{ b[$1] = 1; if ($5 != "NA") r[$1] = r[$1] " " $5; if ($6 != "NA") s[$1] = s[$1] " " $6; if ($7 != "NA") c[$1] = c[$1] " " $7 }
	END { for (n in b) printf "%-24s %5s %9s %9s %9s %11s %11s\n", n, "median", "", "", median(r[n]), median(s[n]), median(c[n]) }
' "$log.table" | sort | tee -a "$log"
rm -f "$log.rows" "$log.table"
