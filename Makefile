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

.PHONY: all build test unit e2e e2e-bins lint run bench clean

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

e2e: e2e-bins
	cd test && go test -count=1 -timeout 25m ./...

## e2e-bins: build (once) kube-apiserver and etcd for the end-to-end suite, with progress
e2e-bins:
	cd test && go run ./cmd/buildbins

## lint: go vet and golangci-lint (built from the Go module proxy)
lint:
	go vet ./...
	cd test && go vet ./...
	go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...

## run: throwaway local control plane + nodeaddr for this host, in the foreground (Ctrl-C stops)
run: e2e-bins
	cd test && go run ./cmd/localcluster $(ARGS)

clean:
	rm -rf bin test/.cache
