#!/usr/bin/env bash
# The main job on its embedded default: installs what is missing, builds the release
# configuration and runs `agentkv replay`: the embedded synthetic agentic workload through a
# simulated two-engine SGLang fleet under eight policy arms, printing the arm table and
# writing agentkv-replay.json and agentkv-replay.html in the repository root.
# Extra arguments are passed to `agentkv replay` (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target agentkv
exec build/release/tools/agentkv/agentkv replay "$@"
