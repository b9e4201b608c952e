#!/usr/bin/env bash
# How fast `agentkv load` drives an endpoint, against h2load (Debian nghttp2-client) on the same
# endpoint: one unpaced engine emulator, 1-token outputs, 64 HTTP/1.1 connections each, rounds
# alternating the two clients. Prints per round the load's rates (whole run, first 90 % of the
# requests), its CPU per request, and h2load's rate and CPU on a body of the load's mean prompt
# length. docs/PERFORMANCE.md ("agentkv load, the client") quotes it.
# Usage: scripts/load-speed.sh [rounds=3] [sessions=1000] [context_scale=0.01]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
sessions=${2:-1000}
scale=${3:-0.01}
agentkv=build/release/tools/agentkv/agentkv
command -v h2load >/dev/null || { echo "needs h2load: apt-get install nghttp2-client" >&2; exit 2; }
work=$(mktemp -d)
trap 'kill "${engine:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
"$agentkv" emulate engine --port 0 --page-size 64 --unpaced --max-total-tokens 4000000 \
  >"$work/engine.log" 2>&1 &
engine=$!
for _ in $(seq 50); do grep -q "serving http" "$work/engine.log" && break; sleep 0.1; done
url=$(grep -o "http://[0-9.:]*" "$work/engine.log" | head -1)
for round in $(seq "$rounds"); do
  "$agentkv" load --url "$url" --sessions "$sessions" --context-scale "$scale" \
    --time-scale 10000 --plain-client --output-tokens 1 --connections 64 \
    --json "$work/load.json" --html "" 2>&1 | tail -1
  read -r requests prompt <<<"$(python3 - "$work" "$round" <<'PY'
import json, random, sys
work, seed = sys.argv[1], int(sys.argv[2])
arm = json.load(open(work + "/load.json"))["arms"][0]
prompt = round(arm["prompt_tokens"] / arm["requests_completed"])
random.seed(seed)
body = {"input_ids": [random.randint(1000, 31999) for _ in range(prompt)],
        "sampling_params": {"max_new_tokens": 1, "ignore_eos": True}, "stream": True}
json.dump(body, open(work + "/body.json", "w"))
print(arm["requests_completed"], prompt)
PY
)"
  echo "round $round: h2load, $requests requests of $prompt ids"
  /usr/bin/time -f "h2load CPU: %U s user, %S s system" \
    h2load --h1 -c 64 -n "$requests" -d "$work/body.json" \
    -H 'Content-Type: application/json' "$url/generate" 2>&1 | grep -E "finished in|succeeded|CPU"
done
