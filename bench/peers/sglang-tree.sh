#!/usr/bin/env bash
# Builds bench/peers/sglang_tree_bench, agentkv beside SGLang's C++ radix tree in one program,
# from a checkout of SGLang, and runs it on the standard trace.
#
#   bench/peers/sglang-tree.sh SGLANG_CHECKOUT [BENCHMARK_ARGS...]
#
# SGLANG_CHECKOUT is a folder holding python/sglang/srt/mem_cache/cpp_radix_tree/ (tree_v2.cpp
# and its headers; a whole clone or just those files at their paths). The program is built in
# build/peer (the release configuration plus AGENTKV_SGLANG_TREE_DIR) and run with
# --benchmark_enable_random_interleaving=true and BENCHMARK_ARGS (default
# --benchmark_repetitions=5). Needs Debian's libtorch-dev. The peer's source stays where it is:
# nothing is copied into this repository.
set -euo pipefail
usage="usage: bench/peers/sglang-tree.sh SGLANG_CHECKOUT [BENCHMARK_ARGS...]"
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  echo "$usage" >&2
  exit 2
fi
checkout=$(cd "$1" 2>/dev/null && pwd) || {
  echo "sglang-tree.sh: $1 is not a folder; $usage" >&2
  exit 2
}
shift
tree="$checkout/python/sglang/srt/mem_cache/cpp_radix_tree"
if [ ! -f "$tree/tree_v2.cpp" ]; then
  echo "sglang-tree.sh: $tree/tree_v2.cpp not found; SGLANG_CHECKOUT must hold SGLang's python/ tree" >&2
  exit 2
fi
if ! dpkg -s libtorch-dev >/dev/null 2>&1; then
  echo "sglang-tree.sh: the peer builds against Debian's libtorch-dev: apt-get install libtorch-dev" >&2
  exit 2
fi
cd "$(dirname "$0")/../.."
cmake --preset release -B build/peer -DAGENTKV_SGLANG_TREE_DIR="$tree" >/dev/null
cmake --build build/peer --target sglang_tree_bench
if [ $# -eq 0 ]; then set -- --benchmark_repetitions=5; fi
exec build/peer/bench/peers/sglang_tree_bench --benchmark_enable_random_interleaving=true "$@"
