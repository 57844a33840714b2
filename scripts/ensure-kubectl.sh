#!/usr/bin/env bash
# Makes sure kubectl with kustomize v5 is on the PATH: packages/deploy-check renders deploy/k8s
# with `kubectl kustomize` (`make k8s-render` and its tests). Idempotent: does nothing when a
# recent enough kubectl is installed. Debian's own kubernetes-client (1.20, kustomize v2) is too
# old for the overlays, so this installs kubectl from the Kubernetes project's apt repository
# (pkgs.k8s.io, signed with its release key), minor version $KUBECTL_MINOR.
set -euo pipefail

KUBECTL_MINOR="${KUBECTL_MINOR:-v1.32}"
log() { echo "[ensure-kubectl] $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# The kustomize major version kubectl embeds ("Kustomize Version: v5.5.0"), or 0.
kustomize_major() {
  command -v kubectl >/dev/null 2>&1 || { echo 0; return; }
  kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p' | head -1 | grep . || echo 0
}

if [ "$(kustomize_major)" -ge 5 ]; then
  log "kubectl is installed: $(command -v kubectl) ($(kubectl version --client 2>/dev/null | tr '\n' ' '))"
  exit 0
fi
log "installing kubectl ${KUBECTL_MINOR} from pkgs.k8s.io"
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ca-certificates curl gpg >/dev/null
as_root install -d -m 0755 /etc/apt/keyrings
curl -fsSL "https://pkgs.k8s.io/core:/stable:/${KUBECTL_MINOR}/deb/Release.key" | as_root gpg --batch --yes --dearmor -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg
echo "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] https://pkgs.k8s.io/core:/stable:/${KUBECTL_MINOR}/deb/ /" | as_root tee /etc/apt/sources.list.d/kubernetes.list >/dev/null
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubectl >/dev/null
[ "$(kustomize_major)" -ge 5 ] || { log "kubectl with kustomize v5 is still missing after the install"; exit 1; }
log "kubectl installed: $(command -v kubectl)"
