# replicafed — build, test and run. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

ROOT      := $(abspath .)
BIN       := $(ROOT)/bin
GO        ?= go
export REPLICAFED_BIN_DIR := $(BIN)

# Test control planes need these binaries; `make tools` builds what is
# missing or out of date (see hack/tools/build.sh).
TEST_TOOLS := controller-gen etcd kube kwok helm
TEST_TIMEOUT ?= 60m
GOTESTFLAGS ?= -race

.PHONY: help
help: ## List targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: tools
tools: ## Build pinned tools (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok, helm, controller-gen) into bin/.
	hack/tools/build.sh $(TEST_TOOLS)

.PHONY: generate
generate: ## Regenerate deepcopy code and CRDs (api/crds, charts/replicafed/crds).
	hack/tools/build.sh controller-gen
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(BIN)/controller-gen crd:generateEmbeddedObjectMeta=true paths=./api/... output:crd:artifacts:config=api/crds
	mkdir -p charts/replicafed/crds
	cp api/crds/*.yaml charts/replicafed/crds/
	cp api/policy/federatedreplicaset-selector.yaml charts/replicafed/templates/validatingadmissionpolicy.yaml

.PHONY: verify-generate
verify-generate: generate ## Fail if generated files are not committed.
	@git diff --exit-code -- api charts/replicafed/crds charts/replicafed/templates/validatingadmissionpolicy.yaml || { echo "generated files are stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api charts/replicafed/crds)" || { git status --porcelain -- api charts/replicafed/crds; echo "untracked generated files: run 'make generate' and commit"; exit 1; }

.PHONY: fmt
fmt: ## Format Go code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: ## go vet, a gofmt check and staticcheck (pinned in hack/tools/staticcheck).
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); test -z "$$out" || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	hack/tools/build.sh staticcheck
	$(BIN)/staticcheck ./...

.PHONY: build
build: ## Build bin/replicafed.
	$(GO) build -o $(BIN)/replicafed ./cmd/replicafed

.PHONY: test
test: tools verify-generate lint helm-lint ## Run every test (unit, real API server integration, e2e).
	$(GO) test $(GOTESTFLAGS) -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v /e2e)
	@# The e2e fleet (four control planes, three replicas) runs on its own so
	@# it does not compete with the integration tests for the two cores.
	$(GO) test $(GOTESTFLAGS) -timeout $(TEST_TIMEOUT) ./e2e/...

.PHONY: test-short
test-short: ## Unit tests only (no control planes).
	$(GO) test -short ./...

.PHONY: bench
bench: tools ## Run benchmarks (figures for the issue notes).
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: helm-lint
helm-lint: ## Lint and render the Helm chart.
	@if [ -d charts/replicafed ]; then \
	  $(BIN)/helm lint charts/replicafed && \
	  $(BIN)/helm template replicafed charts/replicafed --namespace replicafed-system > /dev/null; \
	fi

.PHONY: demo
demo: tools build ## Start a hub and three members on real control planes, three replicafed replicas, and the example FRS.
	$(GO) run ./hack/demo --bin-dir $(BIN) --example examples/frontend.yaml

.PHONY: e2e
e2e: tools ## End-to-end tests on local control planes.
	$(GO) test -timeout $(TEST_TIMEOUT) ./e2e/...

.PHONY: chaos
chaos: tools ## Long chaos suite on the e2e fleet (>= 50 leader disruptions); table in e2e/_artifacts/chaos.md.
	REPLICAFED_CHAOS=long $(GO) test $(GOTESTFLAGS) -count=1 -v -timeout 180m -run '^TestChaos$$' ./e2e/

.PHONY: e2e-kind
e2e-kind: ## The same e2e suite on kind clusters (needs Docker and kind).
	REPLICAFED_E2E_PROVIDER=kind $(GO) test -timeout $(TEST_TIMEOUT) ./e2e/...

.PHONY: clean
clean: ## Remove built binaries (keeps tool caches in the Go build cache).
	rm -f $(BIN)/replicafed
