#!/usr/bin/env bash
# Builds the fuzz targets (fuzz/: the protocol parsers, the trace readers, the HTTP server's
# request reader, the coordinator's wire format, the gateway's request reading and the
# admission arithmetic; libFuzzer + AddressSanitizer + UBSan, Clang) in build/fuzz and runs
# each for the given number of seconds (default 60), starting from its checked-in seed corpus
# fuzz/corpus/<target>/. New inputs go to build/fuzz/corpus/<target>/; the seeds are never
# modified. Exits non-zero on any finding (crash, sanitizer report, failed FUZZ_CHECK
# invariant, leak, timeout, out-of-memory); the reproducer is saved under
# build/fuzz/findings/<target>/ and the log is build/fuzz/<target>.log.
# Usage: scripts/fuzz.sh [seconds]
# Needs the Debian packages clang and libclang-rt-14-dev.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: scripts/fuzz.sh [seconds]" >&2
  exit 2
fi
targets=(generate_request_fuzz prometheus_fuzz workers_fuzz mooncake_trace_fuzz bailian_trace_fuzz
  weka_trace_fuzz http_request_fuzz admission_wire_fuzz gateway_request_fuzz admission_ledger_fuzz
  load_stream_fuzz)

CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DAGENTKV_BUILD_FUZZ=ON -DAGENTKV_BUILD_TESTS=OFF -DAGENTKV_BUILD_BENCH=OFF
cmake --build build/fuzz --target "${targets[@]}"

# One libFuzzer run per core at a time (each is single-threaded and runs for its own `seconds`,
# so every target gets the same time as when they ran one after another); the summaries are
# printed in the targets' order.
run_target() {
  local target=$1 seconds=$2
  local corpus=build/fuzz/corpus/$target findings=build/fuzz/findings/$target
  mkdir -p "$corpus" "$findings"
  if build/fuzz/fuzz/"$target" "$corpus" fuzz/corpus/"$target" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
      -print_final_stats=1 -artifact_prefix="$findings/" >build/fuzz/"$target".log 2>&1; then
    echo ok >build/fuzz/"$target".result
  else
    echo FINDING >build/fuzz/"$target".result
  fi
}
export -f run_target
jobs=$(nproc 2>/dev/null || echo 2)
echo "fuzz: running ${#targets[@]} targets for ${seconds}s each, $jobs at a time"
rm -f build/fuzz/*.result
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_target "$1" "$2"' _ {} "$seconds"

status=0
for target in "${targets[@]}"; do
  findings=build/fuzz/findings/$target
  log=build/fuzz/$target.log
  result=$(cat build/fuzz/"$target".result 2>/dev/null || echo FINDING)
  if [ "$result" != ok ]; then status=1; fi
  execs=$(awk '/stat::number_of_executed_units:/ {print $2}' "$log")
  rate=$(awk '/stat::average_exec_per_sec:/ {print $2}' "$log")
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 || true)
  echo "fuzz: $target: $result, ${execs:-?} executions, ${rate:-?} exec/s, ${cov:-cov: ?}"
  if [ "$result" != ok ]; then
    tail -n 40 "$log"
    echo "fuzz: reproduce with: build/fuzz/fuzz/$target $findings/<file>"
  fi
done
exit "$status"
