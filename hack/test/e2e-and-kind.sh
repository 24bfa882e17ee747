#!/usr/bin/env bash
# The last step of `make test`: the e2e suite (local control planes) and the
# kind suite side by side. Usage (from the Makefile):
#   GO=go MAKE=make GOTESTFLAGS=-race TEST_TIMEOUT=60m hack/test/e2e-and-kind.sh
#
# Why side by side: both suites spend most of their time waiting (leader
# elections, QPS-limited members, containers and kubeadm starting), so one
# after the other they left the two cores of a CI machine mostly idle for
# about half an hour (a warm CI run, 2026-12-02: the e2e phase used about a
# third of the CPU over its 12 minutes). The kind suite still waits for its
# images (make kind-prep-wait) before it starts; the e2e suite does not.
#
# The kind suite's output goes to dist/kind-suite.log and is printed whole
# once both have ended, so neither suite's output is interleaved with the
# other's. The step fails if either suite does; both always run to the end.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
GO=${GO:-go}
MAKE=${MAKE:-make}
GOTESTFLAGS=${GOTESTFLAGS--race}
TEST_TIMEOUT=${TEST_TIMEOUT:-60m}

mkdir -p dist
klog=$root/dist/kind-suite.log
start=$(date +%s)

# Its own session, so an interrupt can stop the whole kind suite (a
# non-interactive shell's background jobs ignore SIGINT).
setsid bash -c '"$1" --no-print-directory kind-prep-wait && "$1" --no-print-directory test-kind' _ "$MAKE" \
  > "$klog" 2>&1 < /dev/null &
kpid=$!
trap 'kill -TERM -- "-$kpid" 2>/dev/null; exit 130' INT TERM
echo "kind suite: running beside the e2e suite (log: $klog, printed here when both have ended)"

# shellcheck disable=SC2086 # GOTESTFLAGS holds several flags
$GO test $GOTESTFLAGS -timeout "$TEST_TIMEOUT" ./e2e/...
erc=$?
eend=$(date +%s)
if kill -0 "$kpid" 2>/dev/null; then echo "e2e suite: done; waiting for the kind suite (log: $klog)"; fi
wait "$kpid"
krc=$?
kend=$(date +%s)
trap - INT TERM

echo "===== kind suite (ran beside the e2e suite; $klog) ====="
cat "$klog"
echo "===== end of the kind suite ====="
verdict() { if [ "$1" = 0 ]; then echo ok; else echo "FAILED (status $1)"; fi; }
echo "e2e suite: $(verdict $erc) in $((eend - start))s; kind suite: $(verdict $krc) in $((kend - start))s; both in $((kend > eend ? kend - start : eend - start))s"
[ "$erc" = 0 ] && [ "$krc" = 0 ]
