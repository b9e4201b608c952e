#!/usr/bin/env bash
# Installs exactly the Debian (bookworm) packages agentkv needs to build, test and run.
# prometheus and python3 are for the deployment kit's tests (tests/deploy: promtool checks
# the Prometheus config and alert rules; deploy_check.py checks the rest against the binary);
# chromium for the HTML report's layout test, which renders the page headless.
# pybind11-dev and python3-dev build the Python package (python/, label `python`), pytest runs
# its tests; pip, setuptools, wheel and venv are what `pip install --no-build-isolation .`
# needs offline (README.md). python3-torch: the SGLang adapter's default index type (torch
# tensors, as SGLang passes them) is tested with it (tests/python/test_sglang_torch.py; docs/
# PYTHON.md); without it those tests skip. python3-aiohttp: the asyncio admission client
# (agentkv.admission.AsyncAdmissionClient) is built on it; the blocking client needs only the
# standard library.
# Idempotent: packages already present are left alone, so re-running is cheap and safe.
# Boost comes from the versioned 1.81 packages; nothing here pulls in Debian's default
# libboost-dev (1.74), which conflicts with them.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  # XXH3, for the block-hash benchmark only (bench/block_hash_bench.cc; skipped without it).
  libxxhash-dev
  # Boost.Iostreams: the trace readers read gzip files (data/ ships its traces compressed).
  libboost1.81-dev libboost-iostreams1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libcli11-dev libfmt-dev libspdlog-dev libssl-dev
  clang libclang-rt-14-dev clang-format clang-tidy
  # promtool: the integration tests lint the gateway's and the coordinator's GET /metrics, the
  # deploy tests the Prometheus config and alert rules.
  prometheus python3 chromium
  # The Python package: the extension, its tests, and the offline pip install into a venv.
  pybind11-dev python3-dev python3-pytest python3-pip python3-setuptools python3-wheel
  python3-venv python3-torch
  # The asyncio admission client's HTTP (python/agentkv/_admission_async.py).
  python3-aiohttp
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
