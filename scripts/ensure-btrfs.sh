#!/usr/bin/env bash
# Makes sure btrfs-progs is installed (mkfs.btrfs, btrfs), which the tool-runner's workspace
# storage uses on a btrfs root or image (docs/workspaces.md) and its tests use on a loop-mounted
# image (services/tool-runner/test/workspace-storage.test.ts). Idempotent: does nothing when
# both commands are on the PATH.
set -euo pipefail

log() { echo "[ensure-btrfs] $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
export PATH="$PATH:/usr/sbin:/sbin"

if command -v mkfs.btrfs >/dev/null 2>&1 && command -v btrfs >/dev/null 2>&1; then
  log "btrfs-progs is installed: $(btrfs --version)"
  exit 0
fi
log "installing btrfs-progs from Debian's packages"
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq btrfs-progs >/dev/null
command -v mkfs.btrfs >/dev/null 2>&1 || { log "mkfs.btrfs is still missing after apt-get install"; exit 1; }
log "btrfs-progs installed: $(btrfs --version)"
