#!/usr/bin/env bash
# Makes sure Patroni and etcd are installed (Debian's patroni and etcd-server packages), which
# the local highly available PostgreSQL uses: `make cluster PG=ha` and the failover test
# (apps/cluster/src/ha-postgres.ts, apps/cluster/test/pg-failover.e2e.test.ts). The PostgreSQL
# server binaries come with scripts/ensure-services.sh. Idempotent: does nothing when both
# commands are on the PATH. Neither service is started here: each test or cluster starts its
# own etcd and Patroni nodes on free ports under a temporary folder.
set -euo pipefail

log() { echo "[ensure-patroni] $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if command -v patroni >/dev/null 2>&1 && command -v etcd >/dev/null 2>&1; then
  log "Patroni and etcd are installed: $(patroni --version), $(etcd --version | head -n1)"
  exit 0
fi
log "installing Patroni and etcd from Debian's packages"
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends patroni etcd-server >/dev/null
command -v patroni >/dev/null 2>&1 || { log "patroni is still missing after apt-get install"; exit 1; }
command -v etcd >/dev/null 2>&1 || { log "etcd is still missing after apt-get install"; exit 1; }
log "installed: $(patroni --version), $(etcd --version | head -n1)"
