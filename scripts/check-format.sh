#!/usr/bin/env bash
# Checks that every C++ file under src tools tests bench fuzz python is formatted as
# .clang-format says (clang-format --dry-run -Werror); lists the files that are not and exits
# non-zero if any.
# Changes nothing: `clang-format -i FILE` (or `git clang-format` on staged changes) fixes them.
# Usage: scripts/check-format.sh [clang-format binary]   (default: clang-format)
set -euo pipefail
cd "$(dirname "$0")/.."

clang_format=${1:-${CLANG_FORMAT:-clang-format}}
if ! command -v "$clang_format" >/dev/null; then
  echo "check-format: $clang_format not found (Debian package clang-format)" >&2
  exit 2
fi

mapfile -t files < <(git ls-files -- 'src/*.h' 'src/*.cc' 'tools/*.h' 'tools/*.cc' \
  'tests/*.h' 'tests/*.cc' 'bench/*.h' 'bench/*.cc' 'fuzz/*.h' 'fuzz/*.cc' 'python/*.h' \
  'python/*.cc')
failing=()
for file in "${files[@]}"; do
  if ! "$clang_format" --dry-run -Werror "$file" >/dev/null 2>&1; then failing+=("$file"); fi
done
if [ ${#failing[@]} -gt 0 ]; then
  printf 'check-format: not formatted: %s\n' "${failing[@]}"
  echo "check-format: ${#failing[@]} of ${#files[@]} files differ from .clang-format" \
    "(fix with: clang-format -i FILE)"
  exit 1
fi
echo "check-format: all ${#files[@]} files formatted"
