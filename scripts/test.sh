#!/usr/bin/env bash
# Every test: installs what is missing, builds the release configuration (warnings are
# errors; benchmarks are compiled too) and runs its suites (the binary's end-to-end `cli` tests,
# integration, chaos, Python, report, deploy and docs checks), then builds the unit suites
# (label `unit`) under AddressSanitizer + UndefinedBehaviorSanitizer and runs them, then builds
# the threaded suites (label `threaded`: sync, net, service, integration, chaos) with Clang under
# ThreadSanitizer and -Wthread-safety and runs them, then runs each libFuzzer target (protocol
# parsers, trace readers) for AGENTKV_FUZZ_SECONDS (default 10) under ASan+UBSan, then
# clang-tidy over the pure core and net, and last the clang-format check of every source file.
# Every test runs at least once: the unit-test programs are left out of the release build
# (AGENTKV_BUILD_UNIT_TESTS=OFF), since they run under ASan+UBSan, which halves the release
# build; `cmake --preset release` alone builds and registers them as usual.
#
# scripts/test.sh --fresh-clone does the same on a clone of HEAD in a new temporary folder, which
# it removes afterwards: nothing outside the repository (a sibling folder, an ignored or
# uncommitted file, an earlier build) can make the suite pass. .ci/run uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fresh-clone" ]; then
  if [ -n "$(git status --porcelain)" ]; then
    echo "scripts/test.sh: uncommitted changes are not tested: the suite runs on a clone of HEAD" >&2
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  git clone --quiet --no-hardlinks "$PWD" "$work/agentkv"
  echo "scripts/test.sh: testing $(git rev-parse --short HEAD) in a fresh clone, $work/agentkv" >&2
  status=0
  "$work/agentkv/scripts/test.sh" || status=$?
  exit "$status"
elif [ $# -gt 0 ]; then
  echo "usage: scripts/test.sh [--fresh-clone]" >&2
  exit 2
fi
scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)

# Each phase's wall time on stderr, and after each test run its slowest tests, so that a suite
# that outgrows its budget says where the time went.
suite_start=$SECONDS
phase() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "scripts/test.sh: ${name}: $((SECONDS - start)) s (suite so far $((SECONDS - suite_start)) s)" >&2
}
slowest() {
  local costs="build/$1/Testing/Temporary/CTestCostData.txt"
  [ -f "$costs" ] || return 0
  echo "scripts/test.sh: slowest $1 tests (seconds):" >&2
  # sed, not head: it reads the whole list, so that sort never writes into a closed pipe.
  awk 'NF == 3 { printf "  %8.1f  %s\n", $3, $1 }' "$costs" | sort -rn | sed -n '1,8p' >&2
}

phase "release configure" cmake --preset release -DAGENTKV_BUILD_UNIT_TESTS=OFF
phase "release build" cmake --build --preset release -j "$jobs"
phase "release tests" ctest --preset release -j "$jobs"
slowest release

phase "asan configure" cmake --preset asan
phase "asan build" cmake --build --preset asan -j "$jobs"
phase "asan tests" ctest --preset asan -j "$jobs"
slowest asan

# The threaded suites under ThreadSanitizer (Clang; the lock annotations are checked too).
phase "tsan configure" cmake --preset tsan
phase "tsan build" cmake --build --preset tsan -j "$jobs"
phase "tsan tests" ctest --preset tsan -j "$jobs"
slowest tsan

# The protocol parsers and trace readers under libFuzzer (Clang, ASan+UBSan), a bounded time
# each.
phase "fuzz" scripts/fuzz.sh "${AGENTKV_FUZZ_SECONDS:-10}"

# Static checks: clang-tidy on a bounded set, then formatting of every C++ file.
phase "tidy" scripts/tidy.sh "$jobs"
phase "format" scripts/check-format.sh
