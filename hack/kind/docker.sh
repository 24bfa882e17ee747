#!/usr/bin/env bash
# Makes a Docker daemon answer on this machine, or stops the one it started.
#
#   hack/kind/docker.sh up     # no-op when `docker info` answers; otherwise
#                              # installs Debian's docker.io (apt-get) if
#                              # dockerd is missing and starts dockerd as root
#   hack/kind/docker.sh down   # stops dockerd only if `up` started it
#   hack/kind/docker.sh status
#
# The kind clusters need a daemon but nothing else on the machine does, so
# `up` leaves an existing daemon alone and `down` only stops its own (the
# pid is kept in $STATE_DIR/dockerd.pid). Storage is overlay2: the kind node
# image is layered on it and the nodes' anonymous /var volumes use it.
set -euo pipefail
. "$(dirname "$0")/../lib/apt.sh"

STATE_DIR=${REPLICAFED_DOCKER_STATE:-/var/run/replicafed-docker}
PIDFILE=$STATE_DIR/dockerd.pid
LOG=$STATE_DIR/dockerd.log
WAIT=${REPLICAFED_DOCKER_WAIT:-60}

answers() { docker info >/dev/null 2>&1; }

install() {
  command -v dockerd >/dev/null 2>&1 && return
  [ "$(id -u)" = 0 ] || { echo "docker.sh: dockerd is missing and installing it needs root" >&2; exit 1; }
  echo "docker.sh: installing docker.io with apt-get"
  # policy-rc.d 101 keeps the package scripts from starting the daemon
  # themselves (there is no init system to hand it to); `up` starts it.
  local policy=/usr/sbin/policy-rc.d created=
  if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; created=1; fi
  apt_install --no-install-recommends docker.io
  [ -z "$created" ] || rm -f "$policy"
}

up() {
  if answers; then echo "docker.sh: docker answers"; return; fi
  install
  # The docker CLI on PATH may be a different build than the daemon; it
  # negotiates the API version, so either works.
  command -v docker >/dev/null 2>&1 || { echo "docker.sh: no docker CLI after install" >&2; exit 1; }
  mkdir -p "$STATE_DIR"
  echo "docker.sh: starting dockerd (log $LOG)"
  # setsid: the daemon outlives the make or test process that started it.
  setsid dockerd --storage-driver overlay2 --pidfile "$STATE_DIR/dockerd.daemon.pid" >"$LOG" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
  local i
  for ((i = 0; i < WAIT; i++)); do
    if answers; then echo "docker.sh: docker answers after ${i}s"; return; fi
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      echo "docker.sh: dockerd exited; last log lines:" >&2; tail -20 "$LOG" >&2; rm -f "$PIDFILE"; exit 1
    fi
    sleep 1
  done
  echo "docker.sh: dockerd did not answer within ${WAIT}s; last log lines:" >&2
  tail -20 "$LOG" >&2
  exit 1
}

down() {
  [ -f "$PIDFILE" ] || { echo "docker.sh: no dockerd started by this script"; return; }
  local pid; pid=$(cat "$PIDFILE")
  if kill -0 "$pid" 2>/dev/null; then
    echo "docker.sh: stopping dockerd (pid $pid)"
    kill -TERM "$pid"
    local i
    for ((i = 0; i < 30; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    if kill -0 "$pid" 2>/dev/null; then echo "docker.sh: dockerd still running after 30s, killing" >&2; kill -KILL "$pid"; fi
  fi
  rm -f "$PIDFILE"
}

status() {
  if answers; then echo "docker answers"; else echo "docker does not answer"; fi
  if [ -f "$PIDFILE" ]; then echo "started by docker.sh: pid $(cat "$PIDFILE")"; fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
