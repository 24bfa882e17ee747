#!/usr/bin/env bash
# Creates or deletes a kind cluster from the offline node image.
#
#   hack/kind/cluster.sh create NAME [KUBECONFIG] [CONFIG]
#   hack/kind/cluster.sh delete NAME
#
# create starts Docker if needed (docker.sh), builds or loads the node image
# (node-image.sh; KIND_NODE_IMAGE skips that), and runs the pinned kind
# (bin/kind) with hack/kind/bin first on its PATH, so its `docker` calls go
# through the shim that replaces --privileged. CONFIG defaults to
# hack/kind/cluster.yaml. Env: BIN (default <repo>/bin).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BIN:-$root/bin}

# The project's own Docker network (not kind's default "kind").
export KIND_EXPERIMENTAL_DOCKER_NETWORK=replicafed-kind
kind_() { PATH="$here/bin:$PATH" "$BIN/kind" "$@"; }

case "${1:-}" in
  create)
    name=${2:?cluster name}
    kubeconfig=${3:-$HOME/.kube/kind-$name}
    config=${4:-$here/cluster.yaml}
    "$here/docker.sh" up >&2
    image=${KIND_NODE_IMAGE:-$(BIN=$BIN "$here/node-image.sh" | tail -1)}
    mkdir -p "$(dirname "$kubeconfig")"
    kind_ create cluster --name "$name" --image "$image" --config "$config" --kubeconfig "$kubeconfig" --wait 5m
    echo "kubeconfig: $kubeconfig"
    ;;
  delete)
    kind_ delete cluster --name "${2:?cluster name}"
    ;;
  *) echo "usage: $0 create NAME [KUBECONFIG] [CONFIG] | delete NAME" >&2; exit 2 ;;
esac
