package harness

import (
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"sync"
	"testing"
)

var plugin struct {
	once sync.Once
	path string
	err  error
}

// BuildPlugin builds the kubectl-nodeaddr plugin from the main module, static as `make build`
// builds it, once per test process, into this checkout's binary directory (beside nodeaddr). The
// file is named kubectl-nodeaddr so that kubectl finds it on PATH.
func BuildPlugin(progress io.Writer) (string, error) {
	plugin.once.Do(func() {
		plugin.path = filepath.Join(CacheDir(), "bin", fmt.Sprintf("checkout-%08x", crc32.ChecksumIEEE([]byte(RepoDir()))),
			"plugin", "kubectl-nodeaddr")
		plugin.err = goBuild(progress, RepoDir(), "./cmd/kubectl-nodeaddr", plugin.path, []string{"CGO_ENABLED=0"})
	})
	return plugin.path, plugin.err
}

// MustBuildPlugin is BuildPlugin that fails t.
func MustBuildPlugin(t testing.TB) string {
	t.Helper()
	return mustBuild(t, "build kubectl-nodeaddr", BuildPlugin)
}
