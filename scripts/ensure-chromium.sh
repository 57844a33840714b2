#!/usr/bin/env bash
# Makes sure Debian's chromium is installed (/usr/bin/chromium), for the web UI's browser
# tests (services/web-bff/test/ui.e2e.test.ts drives it with playwright-core). Idempotent:
# does nothing when chromium is already on the PATH.
set -euo pipefail

log() { echo "[ensure-chromium] $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if command -v chromium >/dev/null 2>&1; then
  log "chromium is installed: $(command -v chromium)"
  exit 0
fi
log "installing chromium from Debian's packages"
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
command -v chromium >/dev/null 2>&1 || { log "chromium is still missing after apt-get install"; exit 1; }
log "chromium installed: $(command -v chromium)"
