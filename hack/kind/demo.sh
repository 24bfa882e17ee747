#!/usr/bin/env bash
# `make demo-kind`: the demo of `make demo` on kind clusters built offline.
# A hub cluster gets the chart (helm install) with the image `make image`
# built (kind load image-archive); member clusters join with
# `replicafed join`, reached by the hub's pods at their node container's
# address on the kind Docker network; the example FederatedReplicaSet runs
# the project's workload image. The clusters stay up; `make demo-kind-down`
# (demo.sh down) deletes them.
#
#   hack/kind/demo.sh up | down
#
# Env: BIN (default <repo>/bin, with kind, helm, kubectl, replicafed),
# REPLICAFED (the binary that runs join; default $BIN/replicafed),
# IMAGE_ARCHIVE and IMAGE (the archive and reference `make image` wrote),
# DEMO_DIR (kubeconfigs; default <repo>/dist/demo-kind).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BIN:-$root/bin}
DIR=${DEMO_DIR:-$root/dist/demo-kind}
REPLICAFED=${REPLICAFED:-$BIN/replicafed}
NS=replicafed-system
HUB=rf-demo-hub
MEMBERS=(member-a member-b member-c)
declare -A LABELS=([member-a]=region=eu,billing=reserved [member-b]=region=us,billing=reserved [member-c]=region=us,billing=on-demand)

say() { echo "==> $*"; }
t0=$(date +%s)
took() { echo "    ($(( $(date +%s) - t0 ))s)"; }
# The project's own Docker network (not kind's default "kind").
export KIND_EXPERIMENTAL_DOCKER_NETWORK=replicafed-kind
kind_() { PATH="$here/bin:$PATH" "$BIN/kind" "$@"; }
kubectl_() { "$BIN/kubectl" "$@"; }

up() {
  : "${IMAGE_ARCHIVE:?IMAGE_ARCHIVE: the archive make image wrote}" "${IMAGE:?IMAGE: the image reference}"
  "$here/docker.sh" up
  local image; image=$(BIN=$BIN "$here/node-image.sh" | tail -1)
  mkdir -p "$DIR"
  say "creating kind clusters $HUB and ${MEMBERS[*]/#/rf-demo-} from $image"
  # Two at a time: four control planes starting at once on a loaded
  # 2-core machine outran kubeadm's timeouts.
  local pids=() c failed= p config
  for c in hub "${MEMBERS[@]}"; do
    if kind_ get clusters 2>/dev/null | grep -qx "rf-demo-$c"; then continue; fi
    config=$here/cluster.yaml
    # The hub gets a node per chart replica (hub.yaml).
    [ "$c" = hub ] && config=$here/hub.yaml
    kind_ create cluster --name "rf-demo-$c" --image "$image" --config "$config" \
      --kubeconfig "$DIR/$c.kubeconfig" --wait 5m > "$DIR/$c.create.log" 2>&1 &
    pids+=($!)
    if [ ${#pids[@]} = 2 ]; then
      for p in "${pids[@]}"; do wait "$p" || failed=1; done
      pids=()
    fi
  done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  [ -z "$failed" ] || { say "kind create failed; logs in $DIR/*.create.log"; tail -20 "$DIR"/*.create.log; exit 1; }
  took

  say "loading $IMAGE_ARCHIVE into $HUB"
  kind_ load image-archive "$IMAGE_ARCHIVE" --name "$HUB"
  took

  say "helm install replicafed into $HUB"
  local repo=${IMAGE%:*} tag=${IMAGE##*:}
  "$BIN/helm" upgrade --install replicafed "$root/charts/replicafed" --kubeconfig "$DIR/hub.kubeconfig" \
    --namespace "$NS" --create-namespace --set image.repository="$repo" --set image.tag="$tag" \
    --wait --timeout 10m
  took

  local m ip
  for m in "${MEMBERS[@]}"; do
    ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "rf-demo-$m-control-plane")
    say "joining $m (API server https://$ip:6443 for the hub's pods)"
    "$REPLICAFED" join "$m" --member-kubeconfig "$DIR/$m.kubeconfig" --hub-kubeconfig "$DIR/hub.kubeconfig" \
      --namespace "$NS" --labels "${LABELS[$m]}" --member-server "https://$ip:6443"
  done
  took

  say "applying examples/frontend.yaml with the workload image"
  sed -e 's#image: .*#image: replicafed.local/workload:v1#' "$root/examples/frontend.yaml" |
    kubectl_ --kubeconfig "$DIR/hub.kubeconfig" apply -f -
  say "waiting for the FederatedReplicaSet's pods to be ready"
  local deadline=$(( $(date +%s) + 600 )) ready
  while :; do
    ready=$(kubectl_ --kubeconfig "$DIR/hub.kubeconfig" get frs frontend -n default -o jsonpath='{.status.readyReplicas}' 2>/dev/null || true)
    [ "${ready:-0}" = 8 ] && break
    [ "$(date +%s)" -lt "$deadline" ] || { say "frontend has ${ready:-0}/8 ready after 10 minutes"; break; }
    sleep 5
  done
  kubectl_ --kubeconfig "$DIR/hub.kubeconfig" get frs -n default
  for m in "${MEMBERS[@]}"; do
    echo "--- $m"; kubectl_ --kubeconfig "$DIR/$m.kubeconfig" get pods -n default -o wide
  done
  took
  say "clusters stay up; kubeconfigs:"
  for c in hub "${MEMBERS[@]}"; do echo "    $c: $DIR/$c.kubeconfig"; done
  say "make demo-kind-down deletes them"
}

down() {
  local c
  for c in hub "${MEMBERS[@]}"; do kind_ delete cluster --name "rf-demo-$c"; done
  # Refused (and left) while another cluster still uses it.
  docker network rm "$KIND_EXPERIMENTAL_DOCKER_NETWORK" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
