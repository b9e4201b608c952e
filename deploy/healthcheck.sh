#!/usr/bin/env bash
# The container health check of every agentkv server: exits 0 when GET /health on
# 127.0.0.1:PORT answers 200, else 1. PORT is the first argument, else $AGENTKV_HEALTH_PORT,
# else 8080. Uses bash's /dev/tcp only, because the runtime image has no curl or wget.
#   agentkv-healthcheck 7000
set -uo pipefail
port="${1:-${AGENTKV_HEALTH_PORT:-8080}}"
host="${AGENTKV_HEALTH_HOST:-127.0.0.1}"
if ! exec 3<>"/dev/tcp/${host}/${port}"; then
  exit 1
fi
printf 'GET /health HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "${host}" >&3
status_line=""
IFS= read -r -t 5 status_line <&3 || exit 1
[[ "${status_line}" == "HTTP/1.1 200 "* ]] || exit 1
exit 0
