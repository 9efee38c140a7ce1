package main

// version is the VERSION file's (fileVersion, written by `make generate`: an embed directive cannot
// reach the repository root), so every build carries it. `make build` and the Dockerfile stamp it
// and the revision with -ldflags "-X main.version=... -X main.revision=$(git rev-parse HEAD)"; -X
// works because version's initializer is a constant. The revision is not read from
// debug.ReadBuildInfo: CI builds with -buildvcs=false and the Docker context has no .git.
var (
	version  = fileVersion
	revision = "unknown"
)
