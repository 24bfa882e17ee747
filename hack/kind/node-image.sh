#!/usr/bin/env bash
# Builds the kind node image offline (`make kind-image`): the bookworm base
# (base.sh), the node files (node/), the binaries hack/tools/build.sh
# kind-node puts in bin/kind-node/, and every image kubeadm and the tests
# need, assembled here (images/) and imported into the node's containerd at
# build time, so a node pulls nothing. Also makes sure bin/kind (the pinned
# kind CLI) is there.
#
# The image is replicafed/kind-node:<kubernetes version>-<key>, the key a
# hash of every input: the tool modules' go.mod/go.sum (the pins) and their
# build script (hack/tools/kind-node.sh), this directory's image sources, the Go version. The cache,
# $REPLICAFED_KIND_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/replicafed/kind),
# outlives a checkout: it keeps a `docker save` of the image, the base
# rootfs tarball and the kind binary, so a fresh clone on the same machine
# (empty bin/) or a fresh Docker daemon loads them instead of building; any
# pin change makes a new key and a build. Prints the image reference on its
# last line. Env: BIN (default <repo>/bin).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BIN:-$root/bin}
CACHE=${REPLICAFED_KIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/replicafed/kind}
NODEBIN=$BIN/kind-node
# The test and demo workload (workload/), pre-imported like the rest.
WORKLOAD_IMAGE=replicafed.local/workload:v1
# The NetworkPolicy agent (netpol/), run by default-cni.yaml's DaemonSet.
NETPOL_IMAGE=replicafed.local/netpol:v1
# The tool modules whose binaries go into the image.
NODE_TOOLS=(kube-node containerd runc crictl cni-plugins coredns)
# shellcheck source=nodeflags.sh
. "$here/nodeflags.sh"
. "$root/hack/lib/apt.sh"

log() { echo "node-image: $*" >&2; }
t0=$(date +%s)
step() { log "$1 ($(( $(date +%s) - t0 ))s)"; }
mkdir -p "$CACHE" "$BIN"

# bin/kind: restored from the cache with its build stamp (so build.sh sees
# it current), or built and then cached.
kind_key=$( { cd "$root/hack/tools/kind" && cat go.mod go.sum; go version; } | sha256sum | cut -c1-12)
if [ ! -x "$BIN/kind" ] && [ -f "$CACHE/kind-$kind_key" ]; then
  cp "$CACHE/kind-$kind_key" "$BIN/kind.tmp" && mv "$BIN/kind.tmp" "$BIN/kind"
  cp "$CACHE/kind-$kind_key.stamp" "$BIN/.kind.stamp"
  log "bin/kind from $CACHE"
fi
BIN_DIR=$BIN "$root/hack/tools/build.sh" kind >&2
if [ ! -f "$CACHE/kind-$kind_key" ]; then
  rm -f "$CACHE"/kind-*
  cp "$BIN/kind" "$CACHE/kind-$kind_key" && cp "$BIN/.kind.stamp" "$CACHE/kind-$kind_key.stamp"
fi

kver=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$root/hack/tools/kube-node/go.mod")
[ -n "$kver" ] || { log "no k8s.io/kubernetes requirement in hack/tools/kube-node/go.mod"; exit 1; }
key=$( {
  cd "$root"
  # Each tool module's pins and its own Go files (coredns has a main).
  for t in "${NODE_TOOLS[@]}"; do
    find "hack/tools/$t" -maxdepth 1 -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) | LC_ALL=C sort | xargs sha256sum
  done
  sha256sum hack/tools/kind-node.sh
  # What goes into the image; the cluster scripts and configs do not.
  find hack/kind/node hack/kind/images hack/kind/pause hack/kind/workload hack/kind/netpol hack/kind/node-image.sh hack/kind/base.sh \
    -type f ! -name '*_test.go' | LC_ALL=C sort | xargs sha256sum
  go version
} | sha256sum | cut -c1-12)
ref=replicafed/kind-node:$kver-$key
saved=$CACHE/node-$kver-$key.tar

if docker image inspect "$ref" >/dev/null 2>&1; then log "$ref is current"; echo "$ref"; exit 0; fi
if [ -f "$saved" ]; then
  step "loading $saved"
  docker load -i "$saved" >/dev/null
  step "loaded $ref"
  echo "$ref"; exit 0
fi

# The build host's own packages, from Debian: debootstrap for the base
# rootfs (base.sh), pkg-config and libseccomp's headers for runc's cgo
# seccomp support (hack/tools/kind-node.sh). A fresh machine lacks all three.
host_packages() {
  local need=()
  command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
  command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
  pkg-config --exists libseccomp 2>/dev/null || need+=(libseccomp-dev)
  [ ${#need[@]} -gt 0 ] || return 0
  [ "$(id -u)" = 0 ] || { log "the build needs Debian's ${need[*]}; installing them needs root"; exit 1; }
  step "installing ${need[*]} with apt-get"
  apt_install --no-install-recommends "${need[@]}"
}
host_packages

step "building the node binaries (hack/tools/build.sh kind-node)"
BIN_DIR=$BIN "$root/hack/tools/build.sh" kind-node >&2
for f in kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd \
  containerd containerd-shim-runc-v2 ctr runc crictl coredns cni/bridge cni/host-local cni/loopback cni/portmap cni/ptp; do
  [ -x "$NODEBIN/$f" ] || { log "missing $NODEBIN/$f after hack/tools/build.sh kind-node"; exit 1; }
done
[ "$("$NODEBIN/kubeadm" version -o short)" = "$kver" ] || { log "bin/kind-node/kubeadm is not $kver"; exit 1; }
base=$(CACHE=$CACHE "$here/base.sh" | tail -1)

work=$(mktemp -d /var/tmp/replicafed-kind-node.XXXXXX)
builder=replicafed-kind-build-$key
cleanup() { docker rm -f "$builder" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT

# The images kubeadm names for this version (`kubeadm config images list`),
# plus the test workload. The control-plane binaries are cgo builds, so
# those images sit on the Debian base layer (glibc; iptables and nft for
# kube-proxy); pause and CoreDNS are static and stand alone.
step "assembling images"
declare -A want
while read -r img; do
  case "$img" in
    */kube-apiserver:*) want[kube-apiserver]=$img ;;
    */kube-controller-manager:*) want[kube-controller-manager]=$img ;;
    */kube-scheduler:*) want[kube-scheduler]=$img ;;
    */kube-proxy:*) want[kube-proxy]=$img ;;
    */etcd:*) want[etcd]=$img ;;
    */coredns:*) want[coredns]=$img ;;
    */pause:*) want[pause]=$img ;;
    *) log "kubeadm lists an image this script does not build: $img"; exit 1 ;;
  esac
done < <("$NODEBIN/kubeadm" config images list --kubernetes-version "$kver")
for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns pause; do
  [ -n "${want[$c]:-}" ] || { log "kubeadm lists no $c image"; exit 1; }
done
# containerd's sandbox image (node/etc/containerd/config.toml) must be the
# pause image kubeadm names, or pods wait for a pull that cannot happen.
grep -q "sandbox = '${want[pause]}'" "$here/node/etc/containerd/config.toml" || {
  log "node/etc/containerd/config.toml's sandbox image is not ${want[pause]}"; exit 1; }

(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/" ./hack/kind/pause ./hack/kind/workload)
# The NetworkPolicy agent is its own module (kube-network-policies' pins).
(cd "$root/hack/kind/netpol" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/netpol" .)
args=(--out "$work/images.tar" --base-layer "$CACHE/base-${base##*:}.tar.gz")
for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd; do
  args+=(--image "${want[$c]}" --on base --add "/usr/local/bin/$c=$NODEBIN/$c")
done
args+=(--image "${want[coredns]}" --on scratch --add "/coredns=$NODEBIN/coredns" --entrypoint /coredns)
# The e2e suite's pod templates name pause:3.10 (a container that only
# waits); the same binary serves under that tag.
for p in "${want[pause]}" registry.k8s.io/pause:3.10; do
  args+=(--image "$p" --on scratch --add "/pause=$work/pause" --entrypoint /pause --user 65535:65535)
done
args+=(--image "$WORKLOAD_IMAGE" --on scratch --add "/workload=$work/workload" --entrypoint /workload --user 65532:65532)
# On the Debian base for its iptables (the steering rules).
args+=(--image "$NETPOL_IMAGE" --on base --add "/usr/local/bin/netpol=$work/netpol" --entrypoint /usr/local/bin/netpol)
(cd "$root" && go run ./hack/kind/images "${args[@]}")

step "adding node files and binaries to $base"
ctx=$work/ctx
mkdir -p "$ctx/rootfs/usr/bin" "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/usr/local/sbin" "$ctx/rootfs/opt/cni/bin" "$ctx/rootfs/kind"
cp -a "$here/node/." "$ctx/rootfs/"
cp "$NODEBIN"/{kubelet,kubeadm,kubectl} "$ctx/rootfs/usr/bin/"
cp "$NODEBIN"/{containerd,containerd-shim-runc-v2,ctr,crictl} "$ctx/rootfs/usr/local/bin/"
cp "$NODEBIN/runc" "$ctx/rootfs/usr/local/sbin/"
cp "$NODEBIN"/cni/* "$ctx/rootfs/opt/cni/bin/"
# kind reads the node's Kubernetes version from /kind/version.
echo "$kver" > "$ctx/rootfs/kind/version"
cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM $base
COPY rootfs/ /
# systemd shuts down in order on SIGRTMIN+3 (SIGTERM re-executes it).
STOPSIGNAL SIGRTMIN+3
# systemd in a container (https://systemd.io/CONTAINER_INTERFACE/): only the
# units a node needs; binfmt registrations are kernel-wide, so never; the
# kernel log is the host's, so journald does not read it.
RUN rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \\
      /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \\
      /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \\
 && find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete \\
 && echo ReadKMsg=no >> /etc/systemd/journald.conf \\
 && systemctl mask systemd-binfmt.service getty.target console-getty.service \\
 && systemctl enable containerd.service kubelet.service kind-node-agent.service
DOCKERFILE
DOCKER_BUILDKIT=0 docker build -q -t "$ref-files" "$ctx" >/dev/null

# Import the images into containerd's store inside the image, as kind's
# node-image build does: pinned (never garbage collected), not unpacked
# (the node unpacks on first use). containerd runs by hand here, not under
# systemd; /var stays in the container's own layer so `docker commit` keeps
# the store.
step "importing images into the node's containerd"
docker run -d --name "$builder" "${NODE_FLAGS[@]}" --tmpfs /run --tmpfs /tmp \
  -v "$work/images.tar:/kind/images.tar:ro" --entrypoint /usr/local/bin/containerd "$ref-files" >/dev/null
for i in $(seq 60); do
  docker exec "$builder" ctr version >/dev/null 2>&1 && break
  [ "$i" = 60 ] && { docker logs "$builder" >&2; log "containerd did not start"; exit 1; }
  sleep 1
done
docker exec "$builder" ctr -n k8s.io images import --label=io.cri-containerd.pinned=pinned \
  --all-platforms --no-unpack --digests /kind/images.tar > "$work/import.log" 2>&1 || {
  tail -20 "$work/import.log" >&2; log "ctr images import failed"; exit 1; }
log "images in the node: $(docker exec "$builder" ctr -n k8s.io images ls -q | grep -v '^sha256:' | tr '\n' ' ')"
# SIGTERM, not the image's stop signal (systemd's, which containerd does
# not handle): containerd closes its store cleanly.
docker kill -s TERM "$builder" >/dev/null
docker wait "$builder" >/dev/null
docker commit \
  -c 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' -c 'CMD []' \
  -c 'ENV container=docker' \
  "$builder" "$ref" >/dev/null
docker rm "$builder" >/dev/null
docker rmi "$ref-files" >/dev/null

step "saving $saved"
rm -f "$CACHE"/node-*.tar
docker save -o "$saved.tmp" "$ref" && mv "$saved.tmp" "$saved"
step "built $ref"
echo "$ref"
