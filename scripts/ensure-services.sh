#!/usr/bin/env bash
# Makes sure PostgreSQL (127.0.0.1:5432, trust auth for local TCP) and Redis (127.0.0.1:6379)
# are running, installing them from Debian's packages on a fresh machine. Idempotent.
set -euo pipefail

PGHOST_ADDR=127.0.0.1
PGPORT=${PGPORT:-5432}
REDIS_PORT=${REDIS_PORT:-6379}

log() { echo "[ensure-services] $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

pg_up() { (exec 3<>/dev/tcp/$PGHOST_ADDR/$PGPORT) 2>/dev/null; }
redis_up() {
  (exec 3<>/dev/tcp/$PGHOST_ADDR/$REDIS_PORT && printf 'PING\r\n' >&3 && read -r -t 2 reply <&3 && [[ "$reply" == +PONG* ]]) 2>/dev/null
}

if pg_up; then
  log "PostgreSQL is up on $PGHOST_ADDR:$PGPORT"
else
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    log "installing PostgreSQL"
    apt_install postgresql
  fi
  version=$(ls /etc/postgresql | sort -V | tail -n1)
  hba=/etc/postgresql/$version/main/pg_hba.conf
  # Tests and the local cluster connect over TCP as postgres without a password.
  if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
  log "starting PostgreSQL $version"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 60); do pg_up && break; sleep 0.5; done
  pg_up || { log "PostgreSQL did not start"; exit 1; }
fi

if redis_up; then
  log "Redis is up on $PGHOST_ADDR:$REDIS_PORT"
else
  if ! command -v redis-server >/dev/null 2>&1; then
    log "installing Redis"
    apt_install redis-server
  fi
  log "starting Redis"
  as_root mkdir -p /var/lib/redis /var/log/redis
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 40); do redis_up && break; sleep 0.25; done
  redis_up || { log "Redis did not start"; exit 1; }
fi
