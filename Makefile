# nodeaddr — see README.md. Every target works on a fresh machine with Go and the Go module proxy.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# VERSION is the single source of the version (the chart, the kustomize image tag and the release
# workflow follow it; test/release checks they agree). REVISION is the commit, stamped into the
# binary because CI builds with -buildvcs=false and the Docker context has no .git.
VERSION := $(shell cat $(CURDIR)/VERSION)
REVISION ?= $(shell git -C $(CURDIR) rev-parse HEAD 2>/dev/null || echo unknown)
PLATFORMS ?= linux/amd64 linux/arm64
# The plugin's other platforms (the release's krew archives: plugins/nodeaddr.yaml).
PLUGIN_PLATFORMS ?= darwin/amd64 darwin/arm64
BIN_DIR ?= bin
GOLANGCI_LINT_VERSION ?= v2.15.0
ACTIONLINT_VERSION ?= v1.7.12
# The build command, identical to the Dockerfile's (only GOOS/GOARCH and -o differ).
GO_BUILD = CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)"
# Where kube-apiserver and etcd are cached between runs (ignored by git).
export NODEADDR_CACHE_DIR ?= $(CURDIR)/test/.cache

.PHONY: all help build image version generate test deps unit e2e e2e-bins matrix-bins test-node test-cluster test-e2ekit lint lint-workflows run bench bench-5000 bench-5000-flowschema bench-5000-outage bench-debounce soak fuzz clean release release-tools

all: build

## help: list the documented targets (the `##` comments in this Makefile)
help:
	@awk '/^## [a-z0-9-]+: / { n = index($$0, ":"); printf "%-15s %s\n", substr($$0, 4, n - 4), substr($$0, n + 2); next } \
	  /^## / { printf "%-15s %s\n", "", substr($$0, 4) }' $(firstword $(MAKEFILE_LIST))

## build: cross-compile nodeaddr and the kubectl-nodeaddr plugin for $(PLATFORMS), and the plugin
## also for $(PLUGIN_PLATFORMS) (an operator's machine), into $(BIN_DIR)/
build:
	@for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; \
	  echo "build $$os/$$arch"; \
	  GOOS=$$os GOARCH=$$arch $(GO_BUILD) -o $(BIN_DIR)/nodeaddr-$$os-$$arch ./cmd/nodeaddr; \
	  GOOS=$$os GOARCH=$$arch $(GO_BUILD) -o $(BIN_DIR)/kubectl-nodeaddr-$$os-$$arch ./cmd/kubectl-nodeaddr; \
	done
	@for p in $(PLUGIN_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; \
	  echo "build kubectl-nodeaddr $$os/$$arch"; \
	  GOOS=$$os GOARCH=$$arch $(GO_BUILD) -o $(BIN_DIR)/kubectl-nodeaddr-$$os-$$arch ./cmd/kubectl-nodeaddr; \
	done

## release: publish VERSION to $(REGISTRY) (HOST/PATH, from the environment): `make build`'s binaries
## as a multi-arch image pushed by digest with a CycloneDX SBOM attestation, the chart as OCI, both
## signed with cosign (keyless, or COSIGN_KEY; COSIGN_SIGNING_CONFIG and COSIGN_TRUSTED_ROOT name
## cosign's services and their roots, default the public Sigstore instance's), and
## the GitHub release's files in $(DIST_DIR) (test/tools/release; test/release rehearses it)
REGISTRY ?=
DIST_DIR ?= $(CURDIR)/dist
COSIGN_KEY ?=
COSIGN_SIGNING_CONFIG ?=
COSIGN_TRUSTED_ROOT ?=
SOURCE_DATE_EPOCH ?= $(shell git -C $(CURDIR) log -1 --format=%ct 2>/dev/null || echo 0)
# The release tools, built from the Go module proxy (go install NAME@VERSION) into the test cache.
COSIGN_VERSION ?= v3.1.3
CYCLONEDX_GOMOD_VERSION ?= v1.10.0
HELM_VERSION ?= v4.3.2
RELEASE_TOOLS ?= $(NODEADDR_CACHE_DIR)/bin/release
COSIGN ?= $(RELEASE_TOOLS)/cosign-$(COSIGN_VERSION)
CYCLONEDX_GOMOD ?= $(RELEASE_TOOLS)/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)
HELM ?= $(RELEASE_TOOLS)/helm-$(HELM_VERSION)
release: release-tools
	@test -n "$(REGISTRY)" || { echo "make release: set REGISTRY=HOST/PATH (the image goes to REGISTRY/nodeaddr)" >&2; exit 1; }
	rm -rf $(DIST_DIR)
	$(MAKE) build PLATFORMS="linux/amd64 linux/arm64" BIN_DIR=$(DIST_DIR)/bin
	cd test/tools && go run ./release -repo $(CURDIR) -dist $(DIST_DIR) -registry $(REGISTRY) \
	  -version $(VERSION) -revision $(REVISION) -created $(SOURCE_DATE_EPOCH) \
	  -cosign $(COSIGN) -cosign-key "$(COSIGN_KEY)" -signing-config "$(COSIGN_SIGNING_CONFIG)" \
	  -trusted-root "$(COSIGN_TRUSTED_ROOT)" \
	  -helm $(HELM) -cyclonedx-gomod $(CYCLONEDX_GOMOD)

## release-tools: build (once) cosign, cyclonedx-gomod and helm for `make release`
release-tools: $(COSIGN) $(CYCLONEDX_GOMOD) $(HELM)
$(RELEASE_TOOLS)/%:
	@mkdir -p $(RELEASE_TOOLS)/.build
	name=$*; pkg=$$(case $${name%-v*} in \
	  cosign) echo github.com/sigstore/cosign/v3/cmd/cosign;; \
	  cyclonedx-gomod) echo github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod;; \
	  helm) echo helm.sh/helm/v4/cmd/helm;; esac); \
	  CGO_ENABLED=0 GOBIN=$(RELEASE_TOOLS)/.build go install -trimpath -ldflags=-s\ -w $$pkg@$${name##*-} && \
	  mv $(RELEASE_TOOLS)/.build/$${name%-v*} $@

## image: build the image for $(PLATFORMS) (linux/ARCH only) and push it to $(REGISTRY)/nodeaddr
## (REGISTRY=HOST/PATH, required; credentials from `docker login`), tagged VERSION: the image
## `make release` builds, with its builder (test/tools/release, no container engine), unsigned.
## Prints the digest, the kustomize line (an overlay of deploy/ pinning the digest, written to
## $(IMAGE_DIR)/kustomize/) and the Helm line that install it
IMAGE_DIR ?= $(CURDIR)/bin/image
image:
	@test -n "$(REGISTRY)" || { echo "make image: no registry: set REGISTRY=HOST/PATH (the image is pushed to REGISTRY/nodeaddr; log in first with docker login HOST); optionally PLATFORMS=linux/amd64" >&2; exit 2; }
	@arches=; for p in $(PLATFORMS); do \
	  case $$p in linux/?*) ;; *) echo "make image: PLATFORMS: $$p is not linux/ARCH (the image runs on Linux nodes)" >&2; exit 2;; esac; \
	  arch=$${p#linux/}; echo "build nodeaddr linux/$$arch" >&2; \
	  GOOS=linux GOARCH=$$arch $(GO_BUILD) -o $(IMAGE_DIR)/bin/nodeaddr-linux-$$arch ./cmd/nodeaddr; \
	  arches=$$arches$${arches:+,}$$arch; \
	done; \
	test -n "$$arches" || { echo "make image: PLATFORMS is empty" >&2; exit 2; }; \
	cd test/tools && go run ./release -image-only -repo $(CURDIR) -dist $(IMAGE_DIR) -registry $(REGISTRY) \
	  -version $(VERSION) -revision $(REVISION) -created $(SOURCE_DATE_EPOCH) -arches $$arches

## version: print the version and the revision a build stamps
version:
	@echo $(VERSION) $(REVISION)

## generate: writes VERSION into cmd/nodeaddr/version_gen.go (the version of every build, go build
## included; its test fails when they differ), and test/tools/ (its own module) writes the Grafana
## dashboard (Grafana Foundation SDK) into deploy/monitoring and the chart, the chart's copy of the
## alert rules, and the chart's README from its values; test/deploy fails when they are stale
generate:
	printf '%s\n' '// Code generated by make generate from the VERSION file. DO NOT EDIT.' '' 'package main' '' \
	  '// fileVersion is the content of VERSION, the version of every build (version.go).' \
	  'const fileVersion = "$(VERSION)"' >cmd/nodeaddr/version_gen.go
	cd test/tools && go run ./monitoring -repo ../.. && go run ./chartdoc -repo ../..

## test: every test: as root it first installs the missing system packages (make deps), then the
## main module's unit and kernel tests and the end-to-end suite (test/ module); ends with a summary
## of the skipped tests and why (test/run-all)
test:
	test/run-all

## deps: install the system packages the tests need (.ci/install-packages, the one list; needs root)
deps:
	.ci/install-packages

unit:
	go test -count=1 ./...

# test/run-e2e builds what the suite runs (the older releases and the e2e suite's binaries in the
# background, at nice 19, while the packages that need only the newest run), and runs the real
# node, the two-node cluster and the version matrix beside the other packages once their binaries
# are built.
e2e:
	test/run-e2e

## test-node: only the real-node suite (kubelet + containerd + runc in a network namespace, the
## shipped manifests installed with kubectl; scenario 1 also on a whole cluster of the oldest
## release); ends with one line per scenario and its figures
test-node: e2e-bins
	cd test && go run ./cmd/buildbins -older-node
	cd test && go test -count=1 -p 1 -timeout 20m -v ./node/ 2>&1 | tee $(NODEADDR_CACHE_DIR)/test-node.log \
	  | grep -E '^(--- |    --- |ok |FAIL|PASS$$|real node scenarios|  (PASS|FAIL|SKIP) )'

## test-cluster: only the two-node cluster (two real nodes in network namespaces on one LAN whose
## DHCP server renumbers node B, flannel between them, Kubernetes' e2e focus list), with the focus
## list also on the renumbered cluster before remediation and five renumberings with remediation
## on (make test runs two): NODEADDR_CLUSTER_FULL
test-cluster: e2e-bins
	cd test && go run ./cmd/buildbins -e2e-only
	cd test && NODEADDR_CLUSTER_FULL=1 go test -count=1 -p 1 -timeout 60m -v ./cluster/ 2>&1 | tee $(NODEADDR_CACHE_DIR)/test-cluster.log \
	  | grep -E '^(--- |    --- |ok |FAIL|PASS$$|\| |.*renumbering of node B)'

## test-e2ekit: only Kubernetes' own e2e tests (e2e.test v1.37.2 trimmed to the Node-address focus
## list) on a real one-node cluster; the two-node specs run in test/cluster (test/e2ekit)
test-e2ekit: e2e-bins
	cd test && go run ./cmd/buildbins -e2e-only
	cd test && go test -count=1 -p 1 -timeout 30m -v ./e2ekit/

## e2e-bins: build (once) kube-apiserver, etcd and the real node's components, with progress
e2e-bins:
	cd test && go run ./cmd/buildbins

## matrix-bins: build (once) the older kube-apiservers and each release's policy type checker for
## test/matrix, and the oldest release's kubelet, kube-controller-manager and kube-scheduler for test/node
matrix-bins:
	cd test && go run ./cmd/buildbins -matrix

## lint: go vet, golangci-lint and actionlint on .github/workflows (both built from the Go module proxy)
lint: lint-workflows
	go vet ./...
	cd test && go vet ./...
	cd test/tools && go vet ./...
	go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...

## lint-workflows: actionlint on the GitHub workflows (shellcheck too, when installed)
lint-workflows:
	go run github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

## run: throwaway local control plane + nodeaddr for this host, in the foreground (Ctrl-C stops)
# Built, then run directly: `go run` exits 1 when Ctrl-C reaches it, which make reports as a failure.
# localcluster builds (once, with progress) only what it runs: kube-apiserver, etcd and nodeaddr;
# no cgo, no system package.
run:
	cd test && go build -o $(NODEADDR_CACHE_DIR)/bin/localcluster ./cmd/localcluster
	$(NODEADDR_CACHE_DIR)/bin/localcluster $(ARGS)

## bench: micro-benchmarks and the harness benchmarks; regenerates docs/BENCHMARKS.md (about 35 min)
# docs/BENCHMARKS.md is the results page (at most 300 lines): this run's reports (sections 1-5,
# 500 agents, the 500-agent outage, the real node, NAT), then docs/bench/results.md (the tables of
# the runs too long for bench, each with its commit and date: 5 000 agents, CSR approval, the
# 5 000-agent outage, the soak, the debounce table), then the micro-benchmarks as a table. The
# notebook behind them (docs/bench/*.md, indexed by docs/bench/README.md) is linked, not copied.
bench: e2e-bins
	mkdir -p $(NODEADDR_CACHE_DIR)
	go test -run '^$$' -bench . -benchmem ./watcher/ ./resolver/ ./publisher/ | tee $(NODEADDR_CACHE_DIR)/micro.txt
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/report.md go test -tags bench -run TestReport -v -count=1 -timeout 90m ./bench/
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/scale.md go test -tags bench -run TestScale500 -v -count=1 -timeout 60m ./scale/
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/outage.md go test -tags bench -run TestScaleOutage -v -count=1 -timeout 40m ./scale/
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/realnode.md go test -tags bench -run TestRegistrationToTaintRemoved -v -count=1 -p 1 -timeout 20m ./node/
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/renumber.md go test -tags bench -run TestRenumberingToExec -v -count=1 -p 1 -timeout 20m ./node/
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/nat.md go test -tags bench -run TestNATUplinkChangeBench -v -count=1 -timeout 10m ./nat/
	{ cat $(NODEADDR_CACHE_DIR)/report.md $(NODEADDR_CACHE_DIR)/scale.md; echo; cat $(NODEADDR_CACHE_DIR)/outage.md; echo; \
	  cat $(NODEADDR_CACHE_DIR)/realnode.md $(NODEADDR_CACHE_DIR)/renumber.md $(NODEADDR_CACHE_DIR)/nat.md; echo; \
	  cat docs/bench/results.md; \
	  printf '\n## Micro-benchmarks\n\n`go test -bench . -benchmem` on the hot paths of `watcher/`, `resolver/` and `publisher/` (%s):\n\n| benchmark | ns/op | B/op | allocs/op |\n|---|---|---|---|\n' \
	    "$$(sed -n 's/^cpu: //p' $(NODEADDR_CACHE_DIR)/micro.txt | head -n 1)"; \
	  awk '/^Benchmark/ { printf "| `%s` | %s | %s | %s |\n", $$1, $$3, $$5, $$7 }' $(NODEADDR_CACHE_DIR)/micro.txt; } > docs/BENCHMARKS.md
	@n=$$(wc -l < docs/BENCHMARKS.md); if [ $$n -gt 300 ]; then echo "docs/BENCHMARKS.md has $$n lines (at most 300): move detail to docs/bench/" >&2; exit 1; fi

## bench-5000: the scale benchmark at 5 000 agents, priority and fairness on, bystander kubelets and a
## controller, 10 idle minutes; writes docs/bench/scale-5000.md, which docs/bench/results.md sums up (about 20 min)
bench-5000: e2e-bins
	cd test && NODEADDR_SCALE_NODES=5000 NODEADDR_SCALE_APF=on NODEADDR_SCALE_IDLE=10m \
	  NODEADDR_BENCH_OUT=$(CURDIR)/docs/bench/scale-5000.md go test -tags bench -run TestScale500 -v -count=1 -timeout 120m ./scale/

## bench-5000-flowschema: bench-5000 with deploy/flowcontrol.yaml's FlowSchema and priority level
## applied before the fleet starts (NODEADDR_SCALE_FLOWSCHEMA=on), to compare with
## docs/bench/scale-5000.md; writes docs/bench/scale-5000-flowschema.md (about 20 min)
bench-5000-flowschema: e2e-bins
	cd test && NODEADDR_SCALE_NODES=5000 NODEADDR_SCALE_APF=on NODEADDR_SCALE_FLOWSCHEMA=on NODEADDR_SCALE_IDLE=10m \
	  NODEADDR_BENCH_OUT=$(CURDIR)/docs/bench/scale-5000-flowschema.md go test -tags bench -run TestScale500 -v -count=1 -timeout 120m ./scale/

## bench-5000-outage: the 60 s kube-apiserver outage at 5 000 agents with priority and fairness on and
## deploy/flowcontrol.yaml applied; writes docs/bench/outage-5000-flowschema.md's measured part to
## $(NODEADDR_CACHE_DIR)/outage-5000.md (about 10 min; the server takes 1–2 min to become ready)
bench-5000-outage: e2e-bins
	cd test && NODEADDR_SCALE_NODES=5000 NODEADDR_SCALE_APF=on NODEADDR_SCALE_FLOWSCHEMA=on \
	  NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/outage-5000.md go test -tags bench -run '^TestScaleOutage$$' -v -count=1 -timeout 60m ./scale/

## soak: test/soak for SOAK_DURATION (default 30m): a seeded random schedule of overlapping faults
## checked against an independent oracle; NODEADDR_SOAK_SEED=N replays a schedule (make test runs
## it for 3 minutes with a random seed, printed first)
SOAK_DURATION ?= 30m
soak: e2e-bins
	cd test && NODEADDR_SOAK_DURATION=$(SOAK_DURATION) NODEADDR_SOAK_OUT=$(NODEADDR_CACHE_DIR)/soak.txt \
	  go test -count=1 -timeout 24h -run '^TestSoak$$' -v ./soak/ 2>&1 | tee $(NODEADDR_CACHE_DIR)/soak.log \
	  | grep -E '^(soak: |--- |ok |FAIL|PASS$$)|VIOLATION of'

## bench-debounce: the debounce table: the agent at fixed debounces (100ms, 25ms, 10ms) and at the
## default on the e2e scenarios (DHCP, VRRP, flap storms, route flood, renumbering, RA renumbering), 10 runs each:
## writes, intermediate states published, reaction p50/p99; writes $(NODEADDR_CACHE_DIR)/debounce.md
## (about 30 min; NODEADDR_DEBOUNCE_SETTINGS and NODEADDR_DEBOUNCE_ONLY select columns and rows).
## docs/bench/debounce.md, summed up in docs/bench/results.md, is a run of it with its conclusion
bench-debounce: e2e-bins
	cd test && NODEADDR_E2E_QUIET=1 NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/debounce.md \
	  go test -tags bench -run '^TestDebounceTable$$' -v -count=1 -timeout 60m ./e2e/

## fuzz: a short fuzzing run of every fuzz target (the seed corpora also run in `make test`)
FUZZTIME ?= 20s
fuzz:
	go test -run '^$$' -fuzz '^FuzzMerge$$' -fuzztime $(FUZZTIME) ./publisher/
	go test -run '^$$' -fuzz '^FuzzParseTargets$$' -fuzztime $(FUZZTIME) ./resolver/
	go test -run '^$$' -fuzz '^FuzzParseFlags$$' -fuzztime $(FUZZTIME) ./internal/cmd/agentcmd/

clean:
	rm -rf bin test/.cache
