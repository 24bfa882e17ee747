#!/usr/bin/env bash
# One kind cluster from the offline node image, checked end to end: node
# Ready, CoreDNS ready (its readiness needs the API server through the
# kubernetes Service, so kube-proxy works too), the project's workload
# image running behind a Service, reached through the API server's proxy
# and through its ClusterIP from the node. Deletes the cluster unless
# KEEP=1.
#
#   hack/kind/smoke.sh [NAME]        (default rf-smoke)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BIN:-$root/bin}
name=${1:-rf-smoke}
dir=$(mktemp -d /tmp/replicafed-kind-smoke.XXXXXX)
kc=$dir/kubeconfig
k() { "$BIN/kind-node/kubectl" --kubeconfig "$kc" "$@"; }
t0=$(date +%s)
say() { echo "==> $* ($(( $(date +%s) - t0 ))s)"; }
cleanup() {
  if [ "${KEEP:-}" = 1 ]; then echo "kept: kubeconfig $kc"; return; fi
  "$here/cluster.sh" delete "$name" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

say "creating cluster $name"
"$here/cluster.sh" create "$name" "$kc"
say "cluster created"
k get nodes -o wide
k wait --for=condition=Ready node --all --timeout=5m
k -n kube-system rollout status deployment/coredns --timeout=5m
say "CoreDNS ready"
k -n kube-system get pods -o wide

k apply -f - <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: workload, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: workload}}
  template:
    metadata: {labels: {app: workload}}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: workload
        image: replicafed.local/workload:v1
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /readyz, port: 8080}}
        livenessProbe: {httpGet: {path: /healthz, port: 8080}}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
---
apiVersion: v1
kind: Service
metadata: {name: workload, namespace: default}
spec:
  selector: {app: workload}
  ports: [{port: 80, targetPort: 8080}]
YAML
k rollout status deployment/workload --timeout=5m
say "workload ready"
k get pods -o wide
echo "API server proxy: $(k get --raw /api/v1/namespaces/default/services/workload:80/proxy/)"
ip=$(k get service workload -o jsonpath='{.spec.clusterIP}')
echo "ClusterIP $ip from the node: $(docker exec "$name-control-plane" bash -c "exec 3<>/dev/tcp/$ip/80; printf 'GET / HTTP/1.0\r\n\r\n' >&3; tail -1 <&3")"
say "smoke test passed"
