# nodeaddr — see README.md. Every target works on a fresh machine with Go and the Go module proxy.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# VERSION is the single source of the version (the chart, the kustomize image tag and the release
# workflow follow it; test/release checks they agree). REVISION is the commit, stamped into the
# binary because CI builds with -buildvcs=false and the Docker context has no .git.
VERSION := $(shell cat $(CURDIR)/VERSION)
REVISION ?= $(shell git -C $(CURDIR) rev-parse HEAD 2>/dev/null || echo unknown)
PLATFORMS ?= linux/amd64 linux/arm64
BIN_DIR ?= bin
GOLANGCI_LINT_VERSION ?= v2.15.0
ACTIONLINT_VERSION ?= v1.7.12
# The build command, identical to the Dockerfile's (only GOOS/GOARCH and -o differ).
GO_BUILD = CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)"
# Where kube-apiserver and etcd are cached between runs (ignored by git).
export NODEADDR_CACHE_DIR ?= $(CURDIR)/test/.cache

.PHONY: all build version generate test unit e2e e2e-bins matrix-bins test-node lint lint-workflows run bench fuzz clean

all: build

## build: cross-compile nodeaddr for $(PLATFORMS) into $(BIN_DIR)/
build:
	@for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; \
	  echo "build $$os/$$arch"; \
	  GOOS=$$os GOARCH=$$arch $(GO_BUILD) -o $(BIN_DIR)/nodeaddr-$$os-$$arch ./cmd/nodeaddr; \
	done

## version: print the version and the revision a build stamps
version:
	@echo $(VERSION) $(REVISION)

## generate: test/tools/ (its own module) writes the Grafana dashboard (Grafana Foundation SDK) into
## deploy/monitoring and the chart, the chart's copy of the alert rules, and the chart's README from
## its values; test/deploy fails when they are stale
generate:
	cd test/tools && go run ./monitoring -repo ../.. && go run ./chartdoc -repo ../..

## test: unit and kernel tests of the main module, then the end-to-end suite (test/ module)
test: unit e2e

unit:
	go test -count=1 ./...

# test/run-e2e builds what the suite runs (the older releases in the background, at nice 19, while
# the packages that need only the newest run), then the version matrix, then the real-node suite
# alone: a kubelet, containerd and a control plane on 2 cores leave no room beside it.
e2e:
	test/run-e2e

## test-node: only the real-node suite (kubelet + containerd + runc in a network namespace, the
## shipped manifests installed with kubectl; scenario 1 also on a whole cluster of the oldest
## release); ends with one line per scenario and its figures
test-node: e2e-bins
	cd test && go run ./cmd/buildbins -older-node
	cd test && go test -count=1 -p 1 -timeout 20m -v ./node/ 2>&1 | tee $(NODEADDR_CACHE_DIR)/test-node.log \
	  | grep -E '^(--- |    --- |ok |FAIL|PASS$$|real node scenarios|  (PASS|FAIL|SKIP) )'

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
run: e2e-bins
	cd test && go build -o $(NODEADDR_CACHE_DIR)/bin/localcluster ./cmd/localcluster
	$(NODEADDR_CACHE_DIR)/bin/localcluster $(ARGS)

## bench: micro-benchmarks and the harness benchmarks; regenerates docs/BENCHMARKS.md (about 35 min)
# The outage subsection is docs/bench/outage-before.md (measured once on the commit before the
# retry change, and the retry schedules compared) followed by this run of TestScaleOutage.
bench: e2e-bins
	mkdir -p $(NODEADDR_CACHE_DIR)
	go test -run '^$$' -bench . -benchmem ./watcher/ ./resolver/ ./publisher/ | tee $(NODEADDR_CACHE_DIR)/micro.txt
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/report.md go test -tags bench -run TestReport -v -count=1 -timeout 90m ./bench/
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/scale.md go test -tags bench -run TestScale500 -v -count=1 -timeout 60m ./scale/
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/outage.md go test -tags bench -run TestScaleOutage -v -count=1 -timeout 40m ./scale/
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/realnode.md go test -tags bench -run TestRegistrationToTaintRemoved -v -count=1 -p 1 -timeout 20m ./node/
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/nat.md go test -tags bench -run TestNATUplinkChangeBench -v -count=1 -timeout 10m ./nat/
	{ cat $(NODEADDR_CACHE_DIR)/report.md $(NODEADDR_CACHE_DIR)/scale.md docs/bench/outage-before.md \
	  $(NODEADDR_CACHE_DIR)/outage.md; echo; cat $(NODEADDR_CACHE_DIR)/realnode.md $(NODEADDR_CACHE_DIR)/nat.md; \
	  printf '\n## Micro-benchmarks\n\n`go test -bench . -benchmem` on the hot paths (ns/op, B/op, allocs/op):\n\n```\n'; \
	  grep -E '^(Benchmark|goos|goarch|cpu)' $(NODEADDR_CACHE_DIR)/micro.txt; printf '```\n'; } > docs/BENCHMARKS.md

## fuzz: a short fuzzing run of every fuzz target (the seed corpora also run in `make test`)
FUZZTIME ?= 20s
fuzz:
	go test -run '^$$' -fuzz '^FuzzMerge$$' -fuzztime $(FUZZTIME) ./publisher/
	go test -run '^$$' -fuzz '^FuzzParseTargets$$' -fuzztime $(FUZZTIME) ./resolver/
	go test -run '^$$' -fuzz '^FuzzParseFlags$$' -fuzztime $(FUZZTIME) ./cmd/nodeaddr/

clean:
	rm -rf bin test/.cache
