#!/usr/bin/env bash
# Runs one package's tests N times in a row while every core is also kept busy by a CPU hog, and reports the passes
# and failures of each top-level test: how stable a tier is on a loaded machine is measured, not hoped for.
#
# Usage: e2e/tools/stress.sh [-n N] [-run REGEXP] [-hogs K] PACKAGE
#   -n     runs (default 10)
#   -run   only the tests matching REGEXP (go test -run)
#   -hogs  busy loops beside the tests (default: one per core, nproc)
# Env:   STRESS_OUT  directory for each run's go test -json output (default .cache/stress/<package>)
# Exit status: 0 when every run passed.
set -euo pipefail

runs=10 run="" hogs=$(nproc)
while [[ $# -gt 1 ]]; do
	case $1 in
	-n) runs=$2; shift 2 ;;
	-run) run=$2; shift 2 ;;
	-hogs) hogs=$2; shift 2 ;;
	*) echo "unknown flag $1" >&2; exit 2 ;;
	esac
done
pkg=${1:?usage: e2e/tools/stress.sh [-n N] [-run REGEXP] [-hogs K] PACKAGE}
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
out="${STRESS_OUT:-$repo/.cache/stress/$(echo "$pkg" | tr -c 'a-zA-Z0-9\n' '_')}"
mkdir -p "$out"

hog_pids=()
stop_hogs() { [[ ${#hog_pids[@]} -eq 0 ]] || kill "${hog_pids[@]}" 2>/dev/null || true; }
trap stop_hogs EXIT
for _ in $(seq "$hogs"); do
	(while :; do :; done) &
	hog_pids+=($!)
done

say() { printf '[stress %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
say "$pkg: $runs runs beside $hogs busy loops; each run's output in $out"
failed_runs=0
for i in $(seq "$runs"); do
	t0=$(date +%s)
	args=(test -race -count=1 -timeout 30m -json)
	[[ -n "$run" ]] && args+=(-run "$run")
	if go "${args[@]}" "$pkg" >"$out/run-$i.json" 2>"$out/run-$i.stderr"; then
		say "run $i passed in $(($(date +%s) - t0))s"
	else
		failed_runs=$((failed_runs + 1))
		say "run $i FAILED in $(($(date +%s) - t0))s: $(grep -o '"Action":"fail","Package":"[^"]*","Test":"[^"/]*"' "$out/run-$i.json" |
			sed 's/.*"Test":"//; s/"$//' | sort -u | tr '\n' ' ')"
	fi
done
stop_hogs

# Per top-level test: passes and failures over every run.
say "per test (passed/failed of $runs runs):"
cat "$out"/run-*.json | grep -o '"Action":"\(pass\|fail\)","Package":"[^"]*","Test":"[^"/]*"' |
	sed 's/"Action":"\([a-z]*\)","Package":"[^"]*","Test":"\([^"]*\)"/\2 \1/' |
	awk '{ n[$1]++; if ($2 == "pass") p[$1]++; else f[$1]++ } END { for (t in n) printf "  %-60s %3d passed %3d failed\n", t, p[t], f[t] }' |
	sort
say "$pkg: $((runs - failed_runs)) of $runs runs passed"
[[ $failed_runs -eq 0 ]]
