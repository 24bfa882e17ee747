# replicafed — build, test and run. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

ROOT      := $(abspath .)
BIN       := $(ROOT)/bin
GO        ?= go
export REPLICAFED_BIN_DIR := $(BIN)

# Test control planes need these binaries; `make tools` builds what is
# missing or out of date (see hack/tools/build.sh).
TEST_TOOLS := controller-gen etcd kube kwok helm metrics-server custom-metrics
TEST_TIMEOUT ?= 60m
GOTESTFLAGS ?= -race
# Test binaries `make test` runs at once in its unit and integration step.
UNIT_PARALLEL ?= 4
# Build flags of the checks that compile replicafed's packages before the
# tests do (hack/memberrbac, go vet, staticcheck): the tests' own, so the
# packages are compiled once, not once plain and once with -race (that
# doubled compile cost about six minutes of a cold CI run).
CHECKFLAGS ?= $(filter -race,$(GOTESTFLAGS))

.PHONY: help
help: ## List targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: tools
tools: ## Build pinned tools (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok, helm, controller-gen) into bin/.
	hack/tools/build.sh $(TEST_TOOLS)

.PHONY: generate
# maxDescLen: the embedded pod template's descriptions alone put the
# FederatedReplicaSet CRD past the 256 KiB annotation limit of client-side
# `kubectl apply` (its last-applied annotation); 120 characters keeps it
# about 185 KB as JSON (TestCRDClientSideApply in charts/ checks it applies).
CRD_MAX_DESC_LEN := 120

generate: ## Regenerate deepcopy code and CRDs (api/crds, charts/replicafed/files/crds).
	hack/tools/build.sh controller-gen
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(BIN)/controller-gen crd:generateEmbeddedObjectMeta=true,maxDescLen=$(CRD_MAX_DESC_LEN) paths=./api/... output:crd:artifacts:config=api/crds
	@# The chart installs the hub CRD as a template (so `helm upgrade` updates
	@# it) that `helm uninstall` keeps: deleting it would delete every
	@# FederatedReplicaSet.
	rm -rf charts/replicafed/crds
	mkdir -p charts/replicafed/files/crds
	sed '/^  annotations:$$/a\    helm.sh/resource-policy: keep' api/crds/replicafed.io_federatedreplicasets.yaml \
	  > charts/replicafed/files/crds/replicafed.io_federatedreplicasets.yaml
	sed '/^  annotations:$$/a\    helm.sh/resource-policy: keep' api/crds/replicafed.io_memberclusters.yaml \
	  > charts/replicafed/files/crds/replicafed.io_memberclusters.yaml
	sed '/^  annotations:$$/a\    helm.sh/resource-policy: keep' api/crds/replicafed.io_federatedhorizontalpodautoscalers.yaml \
	  > charts/replicafed/files/crds/replicafed.io_federatedhorizontalpodautoscalers.yaml
	cp api/policy/federatedreplicaset-selector.yaml charts/replicafed/templates/validatingadmissionpolicy.yaml
	@# Security: member ClusterRole manifests and member chart (federation/memberaccess), Pod Security policies.
	mkdir -p charts/replicafed-member/crds charts/replicafed/files/policy
	cp api/crds/replicafed.io_memberreplicasets.yaml charts/replicafed-member/crds/
	cp api/policy/federatedreplicaset-podsecurity-*.yaml api/policy/federatedreplicaset-finalizer.yaml charts/replicafed/files/policy/
	$(GO) run $(CHECKFLAGS) ./hack/memberrbac

.PHONY: verify-generate
verify-generate: generate ## Fail if generated files are not committed.
	@git diff --exit-code -- api charts/replicafed/files charts/replicafed/templates/validatingadmissionpolicy.yaml charts/replicafed-member deploy/member || { echo "generated files are stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api charts/replicafed/files charts/replicafed-member deploy/member)" || { git status --porcelain -- api charts/replicafed/files charts/replicafed-member deploy/member; echo "untracked generated files: run 'make generate' and commit"; exit 1; }

.PHONY: fmt
fmt: ## Format Go code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: ## go vet, a gofmt check, staticcheck (pinned in hack/tools/staticcheck), the 80-line function rule (funlen) and actionlint on .github/workflows.
	$(GO) vet $(CHECKFLAGS) ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); test -z "$$out" || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	hack/tools/build.sh staticcheck actionlint funlen
	GOFLAGS="$${GOFLAGS:-} $(CHECKFLAGS)" $(BIN)/staticcheck ./...
	@# No product function over 80 lines (tests, generated code, e2e and hack
	@# aside); exceptions, each with its reason, in hack/lint/funlen-exceptions.txt.
	GOFLAGS="$${GOFLAGS:-} $(CHECKFLAGS)" $(BIN)/funlen -lines 80 -exceptions hack/lint/funlen-exceptions.txt $$($(GO) list ./... | grep -v -e /e2e -e /hack/ -e /internal/test)
	@# shellcheck and pyflakes off: their presence differs between machines.
	$(BIN)/actionlint -shellcheck= -pyflakes=

# Release identity stamped into the binary (internal/version) and the image.
# The version is the chart's appVersion, so the chart's default image tag
# names what `make image` builds.
VERSION     ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' charts/replicafed/Chart.yaml)
COMMIT      ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
COMMIT_TIME ?= $(shell git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)
VERSION_LDFLAGS := -X github.com/replicafed/replicafed/internal/version.Version=$(VERSION) -X github.com/replicafed/replicafed/internal/version.Commit=$(COMMIT)

# Every build of replicafed's binaries uses the image's flags (CGO_ENABLED=0,
# -trimpath), as do the e2e fleet and the chart tests: their ~970 dependency
# packages then compile once, not once per flag set.
.PHONY: build
build: ## Build bin/replicafed and the kubectl plugin bin/kubectl-replicafed (version stamped).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/replicafed ./cmd/replicafed
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/kubectl-replicafed ./cmd/kubectl-replicafed

IMAGE_REPO      ?= ghcr.io/replicafed/replicafed
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_OUT       ?= $(ROOT)/dist/image

.PHONY: image
image: ## Build the multi-arch image without Docker: $(IMAGE_OUT)/oci (OCI layout) and $(IMAGE_OUT)/replicafed.oci.tar (OCI archive for `kind load image-archive`).
	@mkdir -p $(IMAGE_OUT)
	@for p in $(IMAGE_PLATFORMS); do \
	  echo "building replicafed $(VERSION) for $$p"; \
	  CGO_ENABLED=0 GOOS=$${p%%/*} GOARCH=$${p##*/} $(GO) build -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)" \
	    -o $(IMAGE_OUT)/bin/$${p%%/*}_$${p##*/}/replicafed ./cmd/replicafed; \
	done
	$(GO) run ./hack/image --repository $(IMAGE_REPO) --version $(VERSION) --commit $(COMMIT) --created $(COMMIT_TIME) \
	  $(foreach p,$(IMAGE_PLATFORMS),--binary $(p)=$(IMAGE_OUT)/bin/$(subst /,_,$(p))/replicafed) \
	  --layout $(IMAGE_OUT)/oci --archive $(IMAGE_OUT)/replicafed.oci.tar

.PHONY: test
test: tools kind-prep-start verify-generate lint helm-lint ## Run every test (unit, real API server integration, e2e).
	@# Four test binaries at a time, the slowest first: most of them wait on
	@# control planes, so with two the cores sat 42 % idle (hack/kind/README.md).
	$(GO) test $(GOTESTFLAGS) -p $(UNIT_PARALLEL) -timeout $(TEST_TIMEOUT) $$(hack/test/unit-packages.sh)
	@# The e2e fleet (four control planes, three replicas) runs on its own so
	@# it does not compete with the integration tests for the two cores. (Run
	@# beside the kind suite it saved time once and none the next time:
	@# hack/kind/README.md.)
	$(GO) test $(GOTESTFLAGS) -timeout $(TEST_TIMEOUT) ./e2e/...
	@$(MAKE) --no-print-directory kind-prep-wait
	@$(MAKE) --no-print-directory test-kind

# The kind suite's images (replicafed's, the kind node image, the previous
# release's) build in the background while `make test` runs its other
# steps: on a cold machine they take about 20 minutes, much of it waiting on
# Debian's archive (docker.io, debootstrap) or compiling while the tests
# wait on control planes; on a warm machine they are up to date in seconds.
# test-kind's e2e-kind still depends on them, so nothing is skipped.
KIND_PREP := $(ROOT)/dist/kind-prep
# The condition test-kind runs the kind suite on.
KIND_WANTED = [ "$${REPLICAFED_KIND:-auto}" = on ] || { [ "$${REPLICAFED_KIND:-auto}" != off ] && docker info >/dev/null 2>&1; }

.PHONY: kind-prep
kind-prep: IMAGE_PLATFORMS = linux/$(shell $(GO) env GOARCH)
kind-prep: tools image kind-image ## Build the kind suite's images: replicafed's, the node image and the previous release's (hack/kind/previous-image.sh; skipped in a shallow clone).
	@hack/kind/previous-image.sh > /dev/null || [ $$? = 3 ]

.PHONY: kind-prep-start
kind-prep-start: tools
	@rm -rf $(KIND_PREP)
	@if $(KIND_WANTED); then \
	  mkdir -p $(KIND_PREP); \
	  echo "kind suite: building its images in the background meanwhile (log: $(KIND_PREP)/log)"; \
	  ( echo $$BASHPID > $(KIND_PREP)/pid; $(MAKE) --no-print-directory kind-prep > $(KIND_PREP)/log 2>&1 < /dev/null; \
	    echo $$? > $(KIND_PREP)/rc ) & \
	fi

.PHONY: kind-prep-wait
kind-prep-wait:
	@[ -f $(KIND_PREP)/pid ] || exit 0; \
	if [ ! -f $(KIND_PREP)/rc ]; then echo "waiting for the kind suite's images (log: $(KIND_PREP)/log)"; fi; \
	while [ ! -f $(KIND_PREP)/rc ] && kill -0 "$$(cat $(KIND_PREP)/pid)" 2>/dev/null; do sleep 5; done; \
	rc=$$(cat $(KIND_PREP)/rc 2>/dev/null || echo none); \
	if [ "$$rc" != 0 ]; then tail -40 $(KIND_PREP)/log; echo "building the kind suite's images failed (status $$rc; log: $(KIND_PREP)/log)"; exit 1; fi; \
	echo "kind suite's images: built in the background"

.PHONY: test-short
test-short: ## Unit tests only (no control planes).
	$(GO) test -short ./...

.PHONY: bench
bench: tools ## Run benchmarks (figures for the issue notes).
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: bench-sidebyside
bench-sidebyside: tools ## kube-controller-manager's ReplicaSet controller vs replicafed's member engine on one control plane (SIDEBYSIDE_PODS, SIDEBYSIDE_PAIRS, SIDEBYSIDE_SETTINGS); table in hack/bench/out/sidebyside.md.
	$(GO) run ./hack/bench/sidebyside --bin-dir $(BIN) --out $(ROOT)/hack/bench/out

.PHONY: bench-fleet
bench-fleet: tools ## Whole-product benchmark on the e2e fleet against per-member kube-controller-manager (BENCH_* settings: hack/bench/fleet).
	$(GO) run ./hack/bench/fleet

.PHONY: soak
soak: tools ## 30 minutes of 1,000 FederatedReplicaSets with a random scale change every second; fails when a replica's heap, goroutines or raft log grow (SOAK_* settings: hack/bench/soak). Not part of make test.
	$(GO) run ./hack/bench/soak

.PHONY: helm-lint
helm-lint: ## Lint and render the Helm chart.
	@if [ -d charts/replicafed ]; then \
	  $(BIN)/helm lint charts/replicafed && \
	  $(BIN)/helm template replicafed charts/replicafed --namespace replicafed-system > /dev/null; \
	fi
	@if [ -d charts/replicafed-member ]; then $(BIN)/helm lint charts/replicafed-member; fi

.PHONY: demo
# DEMO_AUTOSCALER= (empty) leaves the autoscaler (and metrics-server) out.
DEMO_AUTOSCALER ?= examples/frontend-autoscaler.yaml
demo: tools build ## Start a hub and three members on real control planes, three replicafed replicas, the example FRS; once spread, its autoscaler with load raised on one member and dropped.
	$(GO) run ./hack/demo --bin-dir $(BIN) --example examples/frontend.yaml --autoscaler "$(DEMO_AUTOSCALER)"

.PHONY: demo-autoscale
demo-autoscale: demo ## Same as demo (which now shows the autoscaler).

.PHONY: e2e
e2e: tools ## End-to-end tests on local control planes.
	$(GO) test -timeout $(TEST_TIMEOUT) ./e2e/...

.PHONY: chaos
chaos: tools ## Long chaos suite on the e2e fleet (>= 50 leader disruptions); table in e2e/_artifacts/chaos.md.
	REPLICAFED_CHAOS=long $(GO) test $(GOTESTFLAGS) -count=1 -v -timeout 180m -run '^TestChaos$$' ./e2e/

.PHONY: chaos-sharded
# Not part of make test: a sharded fleet of its own and about 24 rounds.
chaos-sharded: tools ## Chaos rounds with sharding on (leader and member-owner SIGKILL/SIGSTOP, 3 cycles; REPLICAFED_CHAOS_CYCLES, REPLICAFED_CHAOS_REPLICAS); table in e2e/_artifacts/chaos-sharded.md.
	REPLICAFED_CHAOS=long REPLICAFED_CHAOS_SHARDED=1 $(GO) test $(GOTESTFLAGS) -count=1 -v -timeout 120m -run '^TestChaosSharded$$' ./e2e/

.PHONY: e2e-kind
# One platform: the image only has to run on this machine's kind nodes.
e2e-kind: IMAGE_PLATFORMS = linux/$(shell $(GO) env GOARCH)
e2e-kind: tools image kind-image ## The kind suite (e2e/kind): the chart helm-installed in a kind hub with the image loaded, kind members joined, and an upgrade from the previous release (installs and starts Docker when it does not answer).
	@# The previous release's image for the upgrade test; its script exits 3
	@# in a clone without that commit, and the test then skips saying so.
	prev=$$(hack/kind/previous-image.sh | tail -1) || { rc=$$?; [ $$rc = 3 ] || exit $$rc; prev=; }; \
	REPLICAFED_E2E_PREVIOUS_IMAGE_ARCHIVE=$$prev REPLICAFED_KIND_NODE_IMAGE=$$(BIN=$(BIN) hack/kind/node-image.sh | tail -1) REPLICAFED_E2E_PROVIDER=kind REPLICAFED_E2E_IMAGE_ARCHIVE=$(IMAGE_OUT)/replicafed.oci.tar REPLICAFED_E2E_IMAGE=$(IMAGE_REPO):$(VERSION) \
	  $(GO) test $(GOTESTFLAGS) -count=1 -v -timeout $(TEST_TIMEOUT) ./e2e/kind/

# `make test`'s kind step: the kind suite when Docker answers (or
# REPLICAFED_KIND=on: e2e-kind installs and starts Docker itself); one line
# otherwise, and with REPLICAFED_KIND=off.
.PHONY: test-kind
test-kind:
	@if [ "$${REPLICAFED_KIND:-auto}" = off ]; then \
	  echo "kind suite SKIPPED: REPLICAFED_KIND=off (run make e2e-kind for it)"; \
	elif [ "$${REPLICAFED_KIND:-auto}" = on ] || docker info >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory e2e-kind; \
	else \
	  echo "kind suite SKIPPED: docker info does not answer (hack/kind/docker.sh up starts it; REPLICAFED_KIND=on makes make test do so)"; \
	fi

# kind clusters built offline (hack/kind): Docker is started when it does
# not answer (hack/kind/docker.sh); every binary and image is built here.
.PHONY: kind-image
kind-image: ## Build the offline kind node image (needs Docker; cached in ~/.cache/replicafed/kind, rebuilt when a pin changes).
	hack/kind/docker.sh up
	BIN=$(BIN) hack/kind/node-image.sh

.PHONY: demo-kind
demo-kind: IMAGE_PLATFORMS = linux/$(shell $(GO) env GOARCH)
demo-kind: tools image build kind-image ## The demo on kind clusters: hub with the chart (helm install) and the image, three members joined; clusters stay up (demo-kind-down).
	BIN=$(BIN) IMAGE_ARCHIVE=$(IMAGE_OUT)/replicafed.oci.tar IMAGE=$(IMAGE_REPO):$(VERSION) hack/kind/demo.sh up

.PHONY: demo-kind-down
demo-kind-down: ## Delete the demo-kind clusters.
	BIN=$(BIN) hack/kind/demo.sh down

.PHONY: clean
clean: ## Remove built binaries and images (keeps tool caches in the Go build cache).
	rm -f $(BIN)/replicafed
	rm -rf $(ROOT)/dist
