# nodeaddr — see README.md. Every target works on a fresh machine with Go and the Go module proxy.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
PLATFORMS ?= linux/amd64 linux/arm64
GOLANGCI_LINT_VERSION ?= v2.15.0
# The build command, identical to the Dockerfile's (only GOOS/GOARCH and -o differ).
GO_BUILD = CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(VERSION)"
# Where kube-apiserver and etcd are cached between runs (ignored by git).
export NODEADDR_CACHE_DIR ?= $(CURDIR)/test/.cache

.PHONY: all build test unit e2e e2e-bins matrix-bins lint run bench fuzz clean

all: build

## build: cross-compile nodeaddr for $(PLATFORMS) into bin/
build:
	@for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; \
	  echo "build $$os/$$arch"; \
	  GOOS=$$os GOARCH=$$arch $(GO_BUILD) -o bin/nodeaddr-$$os-$$arch ./cmd/nodeaddr; \
	done

## test: unit and kernel tests of the main module, then the end-to-end suite (test/ module)
test: unit e2e

unit:
	go test -count=1 ./...

e2e: e2e-bins matrix-bins
	cd test && go test -count=1 -timeout 25m ./...

## e2e-bins: build (once) kube-apiserver and etcd for the end-to-end suite, with progress
e2e-bins:
	cd test && go run ./cmd/buildbins

## matrix-bins: build (once) the older kube-apiservers and each release's policy type checker for test/matrix
matrix-bins:
	cd test && go run ./cmd/buildbins -matrix

## lint: go vet and golangci-lint (built from the Go module proxy)
lint:
	go vet ./...
	cd test && go vet ./...
	go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...

## run: throwaway local control plane + nodeaddr for this host, in the foreground (Ctrl-C stops)
# Built, then run directly: `go run` exits 1 when Ctrl-C reaches it, which make reports as a failure.
run: e2e-bins
	cd test && go build -o $(NODEADDR_CACHE_DIR)/bin/localcluster ./cmd/localcluster
	$(NODEADDR_CACHE_DIR)/bin/localcluster $(ARGS)

## bench: micro-benchmarks and the harness benchmarks; regenerates docs/BENCHMARKS.md (about 30 min)
bench: e2e-bins
	mkdir -p $(NODEADDR_CACHE_DIR)
	go test -run '^$$' -bench . -benchmem ./watcher/ ./resolver/ ./publisher/ | tee $(NODEADDR_CACHE_DIR)/micro.txt
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/report.md go test -tags bench -run TestReport -v -count=1 -timeout 90m ./bench/
	cd test && NODEADDR_BENCH_OUT=$(NODEADDR_CACHE_DIR)/scale.md go test -tags bench -run TestScale500 -v -count=1 -timeout 60m ./scale/
	{ cat $(NODEADDR_CACHE_DIR)/report.md $(NODEADDR_CACHE_DIR)/scale.md; \
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
