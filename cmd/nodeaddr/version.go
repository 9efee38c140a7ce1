package main

import "fmt"

// version and revision are stamped at build time by `make build` and the Dockerfile:
//
//	-ldflags "-X main.version=$(cat VERSION) -X main.revision=$(git rev-parse HEAD)"
//
// The revision is injected rather than read from debug.ReadBuildInfo: CI builds with
// -buildvcs=false and the Docker build context has no .git, so the Go toolchain records none.
var (
	version  = "dev"
	revision = "unknown"
)

// versionLine is what --version prints.
func versionLine() string { return fmt.Sprintf("nodeaddr %s (revision %s)", version, revision) }
