#!/usr/bin/env bash
# Tries configurations of one system, each a few times, interleaved (so a burst of other
# work on the machine hits every variant alike), and prints the throughput or latency of
# each run and the median per variant.
#
#   bash bench/tune.sh <system> <scenario> <repeats> [--jobs N] -- "<variant>" "<variant>" ...
#   bash bench/tune.sh graphile throughput 3 -- "" "concurrency=32" "concurrency=32 localQueueSize=1000"
#
# A variant is a space-separated list of key=value settings for that system ("" = the
# harness's defaults); see the *_DEFAULTS objects in bench/systems/*.ts for the keys.
set -euo pipefail
cd "$(dirname "$0")/.."
system=$1 scenario=$2 repeats=$3
shift 3
extra=()
while [[ $# -gt 0 && $1 != -- ]]; do extra+=("$1"); shift; done
shift || true
variants=("$@")
[[ ${#variants[@]} -gt 0 ]] || variants=("")
node bench/deps.mjs # the peers, in bench/node_modules
field=jobsPerSecond
[[ $scenario == latency ]] && field=p50ms
runs=()
for ((r = 1; r <= repeats; r++)); do
  for i in "${!variants[@]}"; do
    v=${variants[$i]}
    sets=()
    for kv in $v; do sets+=(--set "$system.$kv"); done
    line=$(npx tsx bench/run.ts --no-write --systems "$system" --scenarios "$scenario" "${extra[@]}" "${sets[@]}" 2>/dev/null | grep '^{' || true)
    value=$(node -e 'const l=process.argv[1];const f=process.argv[2];try{const o=JSON.parse(l);console.log(o.error?"error":(f==="p50ms"?`${o.p50ms}/${o.p99ms}`:o[f]))}catch{console.log("error")}' "$line" "$field")
    runs[$i]="${runs[$i]:-}$value "
    echo "run $r  [${v:-defaults}]  $field=$value" >&2
  done
done
echo "system=$system scenario=$scenario ${extra[*]}"
for i in "${!variants[@]}"; do
  v=${variants[$i]}
  med=$(node -e 'const xs=process.argv[1].trim().split(/\s+/).map(s=>parseFloat(s)).filter(Number.isFinite).sort((a,b)=>a-b);console.log(xs.length?xs[Math.floor((xs.length-1)/2)]:"-")' "${runs[$i]}")
  printf '%-60s median %-10s runs: %s\n' "[${v:-defaults}]" "$med" "${runs[$i]}"
done
