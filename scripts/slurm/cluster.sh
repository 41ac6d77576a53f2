#!/usr/bin/env bash
# A real two-node SLURM cluster on this one machine (needs root): munged, slurmctld, slurmd -N n1/-N n2.
#
#   scripts/slurm/cluster.sh install   apt-get the Debian packages (slurmctld slurmd slurm-client munge)
#   scripts/slurm/cluster.sh start     start every daemon, wait until sinfo shows n1 and n2 idle
#   scripts/slurm/cluster.sh stop      cancel jobs, stop every daemon this script started, by pid
#   scripts/slurm/cluster.sh status    sinfo and squeue
#   eval "$(scripts/slurm/cluster.sh env)"   point sbatch/squeue/... at this cluster (SLURM_CONF)
#
# State (rendered slurm.conf, logs, pid files) lives in $LITLAB_SLURM_DIR (default /tmp/litlab-slurm).
# Every wait is bounded; `start` exits non-zero (after stopping what it started) if the cluster
# does not come up within $LITLAB_SLURM_START_TIMEOUT seconds (default 60).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE="${LITLAB_SLURM_DIR:-/tmp/litlab-slurm}"
CONF="$STATE/slurm.conf"
START_TIMEOUT="${LITLAB_SLURM_START_TIMEOUT:-60}"
NODES=(n1 n2)
MUNGE_SOCKET_DIR=/run/munge
export SLURM_CONF="$CONF"

log() { echo "slurm-cluster: $*" >&2; }

have_binaries() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sinfo >/dev/null \
    && command -v munged >/dev/null
}

install() {
  if have_binaries; then
    return 0
  fi
  [ "$(id -u)" = 0 ] || { log "installing slurm needs root"; return 1; }
  command -v apt-get >/dev/null || { log "no apt-get: install slurmctld slurmd slurm-client munge by hand"; return 1; }
  log "installing slurmctld slurmd slurm-client munge (apt-get)"
  timeout 600 apt-get update -qq
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y --no-install-recommends \
    slurmctld slurmd slurm-client munge >"$STATE.apt.log" 2>&1 || { tail -20 "$STATE.apt.log" >&2; return 1; }
}

# Start a daemon in the foreground mode (-D/-F) in the background and record its pid.
spawn() {
  local name=$1
  shift
  "$@" >>"$STATE/$name.out" 2>&1 &
  echo $! >"$STATE/$name.litlab-pid"
}

alive() { [ -f "$STATE/$1.litlab-pid" ] && kill -0 "$(cat "$STATE/$1.litlab-pid")" 2>/dev/null; }

cluster_idle() {
  local states
  states=$(timeout 10 sinfo -h -N -o "%N %T" 2>/dev/null | sort -u) || return 1
  for node in "${NODES[@]}"; do
    grep -Eq "^$node (idle|mixed|allocated)" <<<"$states" || return 1
  done
}

start() {
  [ "$(id -u)" = 0 ] || { log "starting the daemons needs root (munged runs as user munge)"; return 1; }
  have_binaries || { log "slurm is not installed: run '$0 install'"; return 1; }
  mkdir -p "$STATE/ctld" "${NODES[@]/#/$STATE/}"
  sed "s#@STATE@#$STATE#g" "$HERE/slurm.conf" >"$CONF"
  if alive slurmctld && cluster_idle; then
    log "already running ($CONF)"
    return 0
  fi
  stop_daemons

  # munged as user munge, on the default socket that auth/munge uses.
  mkdir -p "$MUNGE_SOCKET_DIR" /var/lib/munge /var/log/munge /etc/munge
  chown munge:munge "$MUNGE_SOCKET_DIR" /var/lib/munge /var/log/munge /etc/munge
  chmod 0755 "$MUNGE_SOCKET_DIR"
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
  spawn munged setpriv --reuid=munge --regid=munge --init-groups munged -F --force
  wait_for "munge" 20 bash -c "timeout 5 munge -n | timeout 5 unmunge >/dev/null"

  spawn slurmctld slurmctld -D -f "$CONF"
  wait_for "slurmctld" 30 bash -c "timeout 5 scontrol ping | grep -q UP"
  for node in "${NODES[@]}"; do
    spawn "slurmd-$node" slurmd -D -N "$node" -f "$CONF"
  done
  if ! wait_for "nodes idle" "$START_TIMEOUT" cluster_idle; then
    timeout 10 scontrol update nodename=n1,n2 state=resume >/dev/null 2>&1 || true
    wait_for "nodes idle after resume" 20 cluster_idle || {
      log "cluster did not come up; logs in $STATE"
      tail -n 20 "$STATE"/*.log "$STATE"/*.out >&2 || true
      stop_daemons
      return 1
    }
  fi
  log "two-node cluster up: SLURM_CONF=$CONF"
  timeout 10 sinfo -N >&2
}

wait_for() {
  local what=$1 seconds=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "timed out after ${seconds}s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
}

# Stop the daemons this script started, by the pids it recorded: TERM, then KILL after 10 s.
stop_daemons() {
  local pidfile pid name
  for name in slurmd-n2 slurmd-n1 slurmctld munged; do
    pidfile="$STATE/$name.litlab-pid"
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 20); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
      done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
}

stop() {
  if alive slurmctld; then
    timeout 10 scancel --full --quiet --state=RUNNING --user="$(id -un)" 2>/dev/null || true
    timeout 10 scancel --quiet --user="$(id -un)" 2>/dev/null || true
  fi
  stop_daemons
  log "stopped"
}

status() {
  timeout 10 sinfo -N
  timeout 10 squeue
}

case "${1:-}" in
  install) mkdir -p "$(dirname "$STATE")" && install ;;
  start) install && start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *)
    echo "usage: $0 install|start|stop|status|env" >&2
    exit 2
    ;;
esac
