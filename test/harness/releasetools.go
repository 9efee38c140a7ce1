package harness

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
)

// DistributionVersion is the container registry the release rehearsal pushes to
// (github.com/distribution/distribution/v3, the registry behind most hosted ones).
const DistributionVersion = "v3.1.2"

// ReleaseTools are what `make release` runs besides helm (cosign, cyclonedx-gomod) and the registry
// its rehearsal pushes to. They are built with `go install NAME@VERSION` (each with its own go.mod)
// into the directory `make release` looks in, at the versions the Makefile names, so a tool built
// here is the one `make release` uses.
type ReleaseTools struct {
	Cosign, CycloneDX, Registry string
}

var releaseTools struct {
	once  sync.Once
	tools ReleaseTools
	err   error
}

// releaseToolDir is the Makefile's RELEASE_TOOLS.
func releaseToolDir() string { return filepath.Join(CacheDir(), "bin", "release") }

// MakefileVersion is the value of `NAME ?= VALUE` in the repository's Makefile.
func MakefileVersion(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(RepoDir(), "Makefile"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` \?= (\S+)$`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("Makefile: no %s ?= line", name)
	}
	return string(m[1]), nil
}

// BuildReleaseTools builds (once, cached) cosign, cyclonedx-gomod and the registry. Cold, cosign is
// the big one (several minutes on 2 cores); test/run-e2e builds them in the background.
func BuildReleaseTools(progress io.Writer) (ReleaseTools, error) {
	r := &releaseTools
	r.once.Do(func() { r.tools, r.err = buildReleaseTools(progress) })
	return r.tools, r.err
}

func buildReleaseTools(progress io.Writer) (ReleaseTools, error) {
	var t ReleaseTools
	tools := []struct {
		out                *string
		name, pkg, version string
	}{
		{&t.Registry, "registry", "github.com/distribution/distribution/v3/cmd/registry", DistributionVersion},
		{&t.CycloneDX, "cyclonedx-gomod", "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod", "CYCLONEDX_GOMOD_VERSION"},
		{&t.Cosign, "cosign", "github.com/sigstore/cosign/v3/cmd/cosign", "COSIGN_VERSION"},
	}
	for _, tool := range tools {
		version := tool.version
		if version[0] != 'v' {
			v, err := MakefileVersion(version)
			if err != nil {
				return t, err
			}
			version = v
		}
		*tool.out = filepath.Join(releaseToolDir(), tool.name+"-"+version)
		if err := installTool(progress, tool.pkg, version, *tool.out); err != nil {
			return t, err
		}
	}
	return t, nil
}

// installTool is the Makefile's $(RELEASE_TOOLS)/% rule: a static, stripped `go install`.
func installTool(progress io.Writer, pkg, version, out string) error {
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	fmt.Fprintf(progress, "harness: installing %s@%s -> %s\n", pkg, version, out)
	gobin := fmt.Sprintf("%s.gobin%d", out, os.Getpid())
	defer os.RemoveAll(gobin)
	err := runGo(progress, RepoDir(), path.Base(pkg), []string{"CGO_ENABLED=0", "GOBIN=" + gobin},
		"install", "-v", "-trimpath", "-ldflags=-s -w", pkg+"@"+version)
	if err != nil {
		return err
	}
	return os.Rename(filepath.Join(gobin, path.Base(pkg)), out)
}

// MustBuildReleaseTools is BuildReleaseTools for tests.
func MustBuildReleaseTools(t testing.TB) ReleaseTools {
	t.Helper()
	return mustBuild(t, "build the release tools", BuildReleaseTools)
}
