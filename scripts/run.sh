#!/usr/bin/env bash
# The main job on its embedded default: installs what is missing, builds the release
# configuration and prints the KV cache hit-ratio curve of the bundled Mooncake trace.
# Extra arguments are passed to `agentkv cache-curve` (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target agentkv
exec build/release/tools/agentkv/agentkv cache-curve \
  --trace data/mooncake/conversation_trace.jsonl "$@"
