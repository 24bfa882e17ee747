#!/usr/bin/env bash
# Prints the packages `make test` runs in its unit and integration step
# (everything but e2e), the slowest first. `go test -p N` starts test
# binaries roughly in the order given, so the few packages that run for
# minutes on real control planes start at once instead of running on alone
# at the end (measured in hack/kind/README.md: "The unit phase, four test
# binaries at a time").
set -euo pipefail
cd "$(dirname "$0")/../.."

# Slowest first, from the per-package times of a CI run (2026-12-02). A name
# that no longer exists is skipped; a new slow package only runs later.
slow=(
  raftstore/expectations
  controller/worker
  raftstore/node
  charts
  internal/test/testcluster
  federation/propagation
  api/v1alpha1
  federation/memberaccess
  federation/planner
  federation/hub
  api/policy
  hack/image
)

module=$(go list -m)
all=$(go list ./... | grep -v -e '/e2e$' -e '/e2e/')
for p in "${slow[@]}"; do
  if grep -qxF "$module/$p" <<<"$all"; then echo "$module/$p"; fi
done
grep -vxF -f <(printf "$module/%s\n" "${slow[@]}") <<<"$all" || true
