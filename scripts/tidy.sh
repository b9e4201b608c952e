#!/usr/bin/env bash
# Runs clang-tidy (the checks in .clang-tidy; any finding is an error) over a bounded set: the
# pure core (base, kv, engine, control, routing) and net, with their headers. Uses the compile
# commands of the tsan preset (Clang), configuring it when needed. Exits non-zero on any finding.
# Usage: scripts/tidy.sh [jobs]   (default: the number of CPUs)
# Needs the Debian package clang-tidy.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=${1:-$(nproc 2>/dev/null || echo 2)}
modules=(base kv engine control routing net)
if [ ! -f build/tsan/compile_commands.json ]; then cmake --preset tsan >/dev/null; fi

files=()
for module in "${modules[@]}"; do
  files+=(src/agentkv/"$module"/*.cc)
done
echo "tidy: ${#files[@]} files of ${modules[*]}"
printf '%s\n' "${files[@]}" |
  xargs -P "$jobs" -n 1 clang-tidy -p build/tsan --quiet --warnings-as-errors='*'
echo "tidy: no findings"
