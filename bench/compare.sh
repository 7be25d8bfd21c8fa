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
# end gives, per benchmark and round, each binary's ratio to its frozen
# baseline and its server+broker CPU µs per operation, and new/old of both.
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
	local line ratio cpu
	line=$("$harness" -run "$1" -pairs 1 -bin "$2" ${BENCH_ARGS:-} 2>&1 | grep -E "^$1: " | tail -1 || true)
	ratio=$(grep -oE 'ratio [0-9.]+' <<<"$line" | head -1 | cut -d' ' -f2 || true)
	cpu=$(grep -oE 'server\+broker [0-9.]+' <<<"$line" | head -1 | cut -d' ' -f2 || true)
	echo "# $3 round $4: $line" | tee -a "$log"
	echo "$1 $4 $3 ${ratio:-NA} ${cpu:-NA}" >>"$log.rows"
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
printf "%-24s %5s %9s %9s %9s %11s %11s %9s\n" benchmark round "old ratio" "new ratio" new/old "old cpu µs" "new cpu µs" new/old | tee -a "$log"
awk '
	{ k = $1 " " $2; if ($3 == "old") { ro[k] = $4; co[k] = $5 } else { rn[k] = $4; cn[k] = $5 }; keys[k] = 1 }
	END {
		for (k in keys) {
			split(k, p, " ")
			rr = (ro[k] > 0 && rn[k] != "NA") ? sprintf("%.3f", rn[k] / ro[k]) : "NA"
			cr = (co[k] > 0 && cn[k] != "NA") ? sprintf("%.3f", cn[k] / co[k]) : "NA"
			printf "%-24s %5s %9s %9s %9s %11s %11s %9s\n", p[1], p[2], ro[k], rn[k], rr, co[k], cn[k], cr
		}
	}' "$log.rows" | sort | tee -a "$log"
rm -f "$log.rows"
