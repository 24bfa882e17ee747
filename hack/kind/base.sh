#!/usr/bin/env bash
# Builds the kind node's base image: a Debian bookworm root file system made
# by debootstrap from Debian's package archive (the only package source this
# project's machines reach), imported into Docker as
# replicafed/kind-base:<key>. The rootfs tarball is kept in $CACHE (bin/kind)
# so a fresh Docker daemon imports it without running debootstrap again.
#
# Why bookworm and not kind's trixie: trixie's systemd 257 refuses to boot on
# a cgroup v1 host unless told on the kernel command line; bookworm's 252
# boots.
#
# Prints the image reference on its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE=${CACHE:?CACHE must name the cache directory}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# What kind's base image installs, less what only other hosts need
# (fuse-overlayfs for zfs/fuse backing, nfs-common, open-iscsi), plus dbus
# for systemd's bus and libseccomp2 for runc's seccomp filters.
PACKAGES=(
  systemd systemd-sysv dbus libseccomp2
  conntrack iptables nftables iproute2 ethtool
  util-linux mount kmod procps e2fsprogs
  bash ca-certificates pigz
)

# Bump when the rootfs steps below change (debootstrap takes minutes, so
# editing comments or the import step must not invalidate the tarball).
RECIPE=1
key=$(printf '%s\n' "$SUITE" "${PACKAGES[@]}" "recipe $RECIPE" | sha256sum | cut -c1-12)
ref=replicafed/kind-base:$key
tarball=$CACHE/base-$key.tar.gz

if docker image inspect "$ref" >/dev/null 2>&1; then echo "$ref"; exit 0; fi

if [ ! -f "$tarball" ]; then
  mkdir -p "$CACHE"
  work=$(mktemp -d /var/tmp/replicafed-kind-base.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  echo "base: debootstrap $SUITE into $work" >&2
  start=$(date +%s)
  include=$(IFS=,; echo "${PACKAGES[*]}")
  debootstrap --variant=minbase --include="$include" "$SUITE" "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
    tail -30 "$work/debootstrap.log" >&2; exit 1; }
  root=$work/rootfs
  # Trim: package lists and caches are not needed at run time; docs are large.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
  # A node's hostname and machine-id are its own: the entrypoint writes a
  # fresh machine-id at each start (systemd expects the file to exist).
  : > "$root/etc/machine-id"
  rm -f "$root/var/lib/dbus/machine-id"
  tar -C "$root" --numeric-owner -cf - . | pigz -1 > "$tarball.tmp" 2>/dev/null || tar -C "$root" --numeric-owner -czf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  echo "base: debootstrap + tar took $(( $(date +%s) - start ))s" >&2
fi

# container=docker tells systemd it runs in a container; the entrypoint and
# the stop signal are set on the node image (node-image.sh).
docker import \
  -c 'ENV container=docker' \
  -c 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
  "$tarball" "$ref" >/dev/null
echo "$ref"
