# Sourced by hack/tools/build.sh (uses its root, bin, gover, module_version
# and up_to_date): builds everything the kind node image holds into
# bin/kind-node/. hack/kind/node-image.sh hashes this file into the image's
# cache key.
# kind_node_part <name> <tool dir> <module> <extra stamp> <outputs> <cmd...>:
# runs cmd in hack/tools/<tool dir> unless bin/.kind-node-<name>.stamp names
# the pinned version (and the extra stamp text) and every output exists.
kind_node_part() {
  local name=$1 dir=$2 mod=$3 extra=$4 outputs=$5; shift 5
  local v; v=$(module_version "$dir" "$mod")
  local want="$mod@$v $gover $extra"
  # shellcheck disable=SC2086
  if up_to_date "kind-node-$name" "$want" $outputs; then echo "kind-node $name $v: up to date"; return; fi
  echo "kind-node $name $v: building"
  local start; start=$(date +%s)
  (cd "$root/hack/tools/$dir" && V=$v "$@")
  echo "$want" > "$bin/.kind-node-$name.stamp"
  echo "  (kind-node $name: $(( $(date +%s) - start ))s)"
}

# The kind node image's binaries. The Kubernetes ones build with the same
# flags as build_kube (cgo on, as the Go default here), so they share its
# build cache; the node and the images made from them carry glibc
# (hack/kind/images). runc needs cgo and libseccomp for the seccomp filters
# kubeadm's static pods ask for (RuntimeDefault).
build_kind_node() {
  local out=$bin/kind-node
  mkdir -p "$out/cni"
  local v; v=$(module_version kube-node k8s.io/kubernetes)
  local minor=${v#v1.}; minor=${minor%%.*}
  local ld="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  local k8s="kubelet kubeadm kubectl kube-proxy kube-apiserver kube-controller-manager kube-scheduler"
  kind_node_part containerd containerd github.com/containerd/containerd/v2 "" \
    "kind-node/containerd kind-node/containerd-shim-runc-v2 kind-node/ctr" \
    sh -c 'cv="-s -w -X github.com/containerd/containerd/v2/version.Version=$V" &&
      go build -trimpath -tags "urfave_cli_no_docs no_btrfs no_zfs no_devmapper" -ldflags "$cv" -o "$1/" \
        github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr &&
      CGO_ENABLED=0 go build -trimpath -tags "urfave_cli_no_docs no_grpc" -ldflags "$cv" -o "$1/" \
        github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2' _ "$out"
  # runc 1.5 defaults to libpathrs (a Rust library Debian bookworm lacks);
  # without the tag it uses its Go implementation.
  kind_node_part runc runc github.com/opencontainers/runc "" kind-node/runc \
    sh -c 'CGO_ENABLED=1 go build -trimpath -buildmode=pie -tags "seccomp urfave_cli_no_docs" -ldflags "-s -w" -o "$1/runc" github.com/opencontainers/runc' _ "$out"
  kind_node_part crictl crictl sigs.k8s.io/cri-tools "" kind-node/crictl \
    sh -c 'CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$V" -o "$1/crictl" sigs.k8s.io/cri-tools/cmd/crictl' _ "$out"
  local cni="bridge loopback ptp host-local portmap"
  kind_node_part cni cni-plugins github.com/containernetworking/plugins "$cni" "$(printf 'kind-node/cni/%s ' $cni)" \
    sh -c 'CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1/cni/" \
      github.com/containernetworking/plugins/plugins/main/bridge github.com/containernetworking/plugins/plugins/main/loopback \
      github.com/containernetworking/plugins/plugins/main/ptp github.com/containernetworking/plugins/plugins/ipam/host-local \
      github.com/containernetworking/plugins/plugins/meta/portmap' _ "$out"
  # Our main (hack/tools/coredns/main.go) with only the plugins the node's
  # Corefile uses; the stamp names its content.
  kind_node_part coredns coredns github.com/coredns/coredns "main.go:$(sha256sum "$root/hack/tools/coredns/main.go" | cut -c1-12)" kind-node/coredns \
    sh -c 'CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1/coredns" .' _ "$out"
  # Last: the Kubernetes binaries share build_kube's cache, so they build
  # fastest after it. The four the test control planes run too are copied
  # from bin/ when build_kube made them at this pin (same module version, Go
  # and flags, so the same program): linking each again costs about a
  # minute on two busy cores.
  local build=$k8s copy=""
  if [ "$(module_version kube k8s.io/kubernetes)" = "$v" ] &&
    up_to_date kube "k8s.io/kubernetes@$v $gover" kube-apiserver kube-controller-manager kube-scheduler kubectl; then
    build="kubelet kubeadm kube-proxy" copy="kube-apiserver kube-controller-manager kube-scheduler kubectl"
  fi
  kind_node_part kube kube-node k8s.io/kubernetes "" "$(printf 'kind-node/%s ' $k8s) kind-node/etcd" \
    sh -c 'go build -trimpath -ldflags "$1" -o "$2/" $(for c in $3; do echo k8s.io/kubernetes/cmd/$c; done) &&
      for c in $4; do cp "$5/$c" "$2/$c.tmp" && mv "$2/$c.tmp" "$2/$c"; done &&
      go build -trimpath -ldflags "-s -w" -o "$2/etcd" go.etcd.io/etcd/server/v3' _ "$ld" "$out" "$build" "$copy" "$bin"
}
