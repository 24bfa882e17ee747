#!/usr/bin/env bash
# Builds the replicafed image of the previous release, the one the chart in
# charts/testdata/replicafed-<version>.tgz runs, for the kind suite's
# upgrade test (e2e/kind, TestHelmUpgradeFromPrevious): that release's
# source, taken from this repository's history (git archive of the commit in
# PREVIOUS_COMMIT), built with its own `make image` for this machine's
# platform. The OCI archive is cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/replicafed/upgrade/image-<version>-<commit>
# (REPLICAFED_UPGRADE_CACHE overrides the parent), so it is built once per
# machine. Prints the archive's path on its last line; prints nothing on it
# and exits 3 when the commit is not in this clone (a shallow clone), so the
# test can say why it skips.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# The previous release: chart 0.1.0 was packaged (7e7f337) from 1f0251d.
PREVIOUS_VERSION=0.1.0
PREVIOUS_COMMIT=1f0251ddafe0532ce086f705471d189daa1fe694
CACHE=${REPLICAFED_UPGRADE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/replicafed/upgrade}
out=$CACHE/image-$PREVIOUS_VERSION-${PREVIOUS_COMMIT:0:12}
log() { echo "previous-image: $*" >&2; }

if [ -f "$out/replicafed.oci.tar" ]; then
  log "replicafed $PREVIOUS_VERSION from $out"
  echo "$out/replicafed.oci.tar"; exit 0
fi
if ! git -C "$root" cat-file -e "$PREVIOUS_COMMIT^{commit}" 2>/dev/null; then
  log "commit $PREVIOUS_COMMIT (release $PREVIOUS_VERSION) is not in this clone (shallow?): cannot build its image"
  exit 3
fi

src=$(mktemp -d /var/tmp/replicafed-previous.XXXXXX)
trap 'rm -rf "$src" "$out.tmp"' EXIT
git -C "$root" archive "$PREVIOUS_COMMIT" | tar -x -C "$src"
rm -rf "$out.tmp"; mkdir -p "$CACHE"
start=$(date +%s)
# Its own Makefile, pinned to what the commit's README documents; no git in
# an archive, so the identity is passed in.
make -C "$src" --no-print-directory image IMAGE_PLATFORMS="linux/$(go env GOARCH)" VERSION="$PREVIOUS_VERSION" \
  COMMIT="$PREVIOUS_COMMIT" COMMIT_TIME="$(git -C "$root" log -1 --format=%cI "$PREVIOUS_COMMIT")" IMAGE_OUT="$out.tmp" >&2
mv "$out.tmp" "$out"
log "built replicafed $PREVIOUS_VERSION in $(( $(date +%s) - start ))s"
echo "$out/replicafed.oci.tar"
