package main

import "fmt"

// version is the VERSION file's (fileVersion, which `make generate` writes into version_gen.go, as
// an embed directive cannot reach the repository root), so every build carries it: go build, go run and go
// install as well as `make build` and the Dockerfile. Those two also stamp it and the revision:
//
//	-ldflags "-X main.version=$(cat VERSION) -X main.revision=$(git rev-parse HEAD)"
//
// -X still overrides the version (a Docker build argument, the test suites' "e2e" builds): it
// works because version's initializer is a constant. TestVersionFile fails when fileVersion and
// VERSION differ.
//
// The revision is injected rather than read from debug.ReadBuildInfo: CI builds with
// -buildvcs=false and the Docker build context has no .git, so the Go toolchain records none.
var (
	version  = fileVersion
	revision = "unknown"
)

// versionLine is what --version prints.
func versionLine() string { return fmt.Sprintf("nodeaddr %s (revision %s)", version, revision) }
