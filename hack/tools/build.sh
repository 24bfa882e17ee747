#!/usr/bin/env bash
# Builds the pinned tool binaries into bin/, skipping any whose stamp already
# matches the pinned module version and Go version. Usage:
#   hack/tools/build.sh [tool...]      (default: all but staticcheck)
# BIN_DIR overrides the output directory (default: bin/).
# Tools: kube (kube-apiserver, kube-scheduler, kube-controller-manager), etcd,
# kwok (binary plus its fast stage definitions; built with metrics-server and
# custom-metrics from one module, hack/tools/testtools), helm, controller-gen,
# staticcheck, actionlint and funlen (for `make lint`; not built by default),
# metrics-server (for members that serve metrics.k8s.io), custom-metrics (for members that serve
# custom.metrics.k8s.io and external.metrics.k8s.io), kind (the kind CLI) and kind-node (everything the kind node image holds,
# into bin/kind-node/: hack/kind/node-image.sh; not built by default).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${BIN_DIR:-$root/bin}
mkdir -p "$bin"
gover=$(go env GOVERSION)

# module_version <tool dir> <module>: the version pinned in that tool module.
module_version() { (cd "$root/hack/tools/$1" && go list -m -f '{{.Version}}' "$2"); }

# up_to_date <stamp name> <wanted stamp> <outputs...>
up_to_date() {
  local stamp=$bin/.$1.stamp want=$2; shift 2
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || return 1
  local f; for f in "$@"; do [ -x "$bin/$f" ] || [ -f "$bin/$f" ] || return 1; done
}

build_kube() {
  local v; v=$(module_version kube k8s.io/kubernetes)
  local want="k8s.io/kubernetes@$v $gover"
  if up_to_date kube "$want" kube-apiserver kube-scheduler kube-controller-manager kubectl; then echo "kube $v: up to date"; return; fi
  local minor=${v#v1.}; minor=${minor%%.*}
  local ld="-s -w"
  local p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  echo "kube $v: building kube-apiserver, kube-scheduler, kube-controller-manager, kubectl"
  (cd "$root/hack/tools/kube" && go build -trimpath -ldflags "$ld" -o "$bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl)
  echo "$want" > "$bin/.kube.stamp"
}

# build_one <tool> <module> <main package> [ldflags]: builds the single
# binary <tool> from hack/tools/<tool>, unless its stamp is current. "@V" in
# the ldflags stands for the pinned module version.
build_one() {
  local tool=$1 mod=$2 pkg=$3 ld=${4-}
  local v; v=$(module_version "$tool" "$mod")
  local want="$mod@$v $gover"
  if up_to_date "$tool" "$want" "$tool"; then echo "$tool $v: up to date"; return; fi
  echo "$tool $v: building"
  local args=(-trimpath)
  [ -z "$ld" ] || args+=(-ldflags "${ld//@V/$v}")
  (cd "$root/hack/tools/$tool" && go build "${args[@]}" -o "$bin/$tool" "$pkg")
  echo "$want" > "$bin/.$tool.stamp"
}

build_etcd() { build_one etcd go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 "-s -w"; }

# kwok, metrics-server and custom-metrics share one tool module
# (hack/tools/testtools), so the Kubernetes library packages they all import
# compile once. One build makes the three binaries under one stamp; asking
# for any of them builds all three.
# metrics-server: the test clusters run it against kwok's fake kubelets so a
# member serves a real metrics.k8s.io (internal/test/testcluster, Options.Metrics).
# custom-metrics: custom-metrics-apiserver's test provider behind a small
# main of ours (hack/tools/testtools/custom-metrics/main.go: its write
# endpoint on a port of the caller's choosing), so test clusters serve real
# custom and external metrics APIs whose values tests set. The stamp covers
# that main.
build_testtools() {
  local dir=$root/hack/tools/testtools
  local want; want="$(cd "$dir" && go list -m -f '{{.Path}}@{{.Version}}' sigs.k8s.io/kwok sigs.k8s.io/metrics-server sigs.k8s.io/custom-metrics-apiserver | tr '\n' ' ')main.go:$(sha256sum "$dir/custom-metrics/main.go" | cut -c1-12) $gover"
  if up_to_date testtools "$want" kwok metrics-server custom-metrics; then echo "testtools: up to date"; return; fi
  echo "testtools: building kwok, metrics-server, custom-metrics"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$bin/" \
    sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/metrics-server/cmd/metrics-server ./custom-metrics)
  echo "$want" > "$bin/.testtools.stamp"
}

# kwok_yaml <name> <stamp text> <paths in the kwok module...>: writes
# bin/<name>.yaml from the pinned kwok module's files (globs allowed,
# kustomization.yaml skipped), atomically so running clusters never read
# half a file, under a stamp of its own that names the module version and
# the file set.
kwok_yaml() {
  local name=$1 what=$2; shift 2
  local v; v=$(module_version testtools sigs.k8s.io/kwok)
  local want="sigs.k8s.io/kwok@$v $what"
  if up_to_date "$name" "$want" "$name.yaml"; then echo "$name $v: up to date"; return; fi
  local dir; dir=$(cd "$root/hack/tools/testtools" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  local tmp="$bin/.$name.yaml.tmp" p f
  : > "$tmp"
  for p in "$@"; do
    # shellcheck disable=SC2231 # $p is a glob on purpose
    for f in "$dir"/$p; do
      case "$f" in */kustomization.yaml) continue ;; esac
      printf -- '---\n' >> "$tmp"
      cat "$f" >> "$tmp"
    done
  done
  mv "$tmp" "$bin/$name.yaml"
  echo "$want" > "$bin/.$name.stamp"
  echo "$name $v: written"
}

# kwok-stages.yaml: kwok's stage definitions. The "fast" stages move nodes
# to Ready and pods to Running at once; the lease heartbeat keeps nodes
# Ready, or kube-controller-manager's node lifecycle controller marks them
# NotReady (and their pods not ready) after its grace period.
build_kwok_stages() {
  kwok_yaml kwok-stages stages=fast+heartbeat-with-lease \
    'kustomize/stage/node/fast/*.yaml' 'kustomize/stage/node/heartbeat-with-lease/*.yaml' 'kustomize/stage/pod/fast/*.yaml'
}

# kwok-metrics.yaml: kwok's own resource-metrics Metric (the kubelet's
# /metrics/resource per fake node) and its ClusterResourceUsage that reads a
# pod's usage from the annotations kwok.x-k8s.io/usage-cpu and
# usage-memory; the test clusters pass it to kwok when they run
# metrics-server (internal/test/testcluster, Options.Metrics).
build_kwok_metrics() {
  kwok_yaml kwok-metrics metrics=resource+usage-from-annotation \
    kustomize/metrics/resource/metrics-resource.yaml kustomize/metrics/usage/usage-from-annotation.yaml
}

build_helm() { build_one helm helm.sh/helm/v4 helm.sh/helm/v4/cmd/helm "-s -w -X helm.sh/helm/v4/internal/version.version=@V"; }

build_controller_gen() { build_one controller-gen sigs.k8s.io/controller-tools sigs.k8s.io/controller-tools/cmd/controller-gen; }

build_actionlint() { build_one actionlint github.com/rhysd/actionlint github.com/rhysd/actionlint/cmd/actionlint "-s -w -X github.com/rhysd/actionlint.version=@V"; }

build_staticcheck() { build_one staticcheck honnef.co/go/tools honnef.co/go/tools/cmd/staticcheck; }

build_kind() { build_one kind sigs.k8s.io/kind sigs.k8s.io/kind "-s -w"; }

# funlen: the project's own main around github.com/ultraware/funlen, so its
# stamp also names the main's content.
build_funlen() {
  local v; v=$(module_version funlen github.com/ultraware/funlen)
  local want; want="github.com/ultraware/funlen@$v $gover $(cat "$root/hack/tools/funlen/main.go" | sha256sum | cut -c1-16)"
  if up_to_date funlen "$want" funlen; then echo "funlen $v: up to date"; return; fi
  echo "funlen $v: building"
  (cd "$root/hack/tools/funlen" && go build -trimpath -o "$bin/funlen" .)
  echo "$want" > "$bin/.funlen.stamp"
}

# The kind node image's binaries (kind-node): hack/tools/kind-node.sh, a file
# of its own so that the node image's cache key (hack/kind/node-image.sh)
# changes with it and not with every other tool here.
# shellcheck source=kind-node.sh
. "$root/hack/tools/kind-node.sh"

tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(controller-gen etcd kube kwok helm metrics-server custom-metrics)
for t in "${tools[@]}"; do
  start=$(date +%s)
  case "$t" in
    kube) build_kube ;;
    etcd) build_etcd ;;
    kwok) build_testtools; build_kwok_stages; build_kwok_metrics ;;
    helm) build_helm ;;
    controller-gen) build_controller_gen ;;
    actionlint) build_actionlint ;;
    staticcheck) build_staticcheck ;;
    kind) build_kind ;;
    metrics-server | custom-metrics) build_testtools ;;
    funlen) build_funlen ;;
    kind-node) build_kind_node ;;
    *) echo "unknown tool: $t" >&2; exit 2 ;;
  esac
  echo "  ($t: $(( $(date +%s) - start ))s)"
done
