package harness

import (
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// HelmVersion is the Helm release test/cmd/helm is built from (test/go.mod pins helm.sh/helm/v4).
const HelmVersion = "v4.3.2"

var (
	helmOnce sync.Once
	helmBin  string
	helmErr  error
)

// BuildHelm builds (or reuses) the helm CLI from test/cmd/helm, keyed by HelmVersion and
// KubernetesVersion (it links the same k8s.io modules as kubectl). Only the chart tests need it,
// so Build does not build it.
func BuildHelm(progress io.Writer) (string, error) {
	helmOnce.Do(func() {
		helmBin = filepath.Join(CacheDir(), "bin", KubernetesVersion, "helm-"+HelmVersion)
		if _, err := os.Stat(helmBin); err == nil {
			return
		}
		helmErr = goBuild(progress, TestModuleDir(), "./cmd/helm", helmBin, nil)
	})
	return helmBin, helmErr
}

// HelmEnv is the environment of a helm command whose caches and configuration go to the throwaway
// directory home: nothing is fetched or written elsewhere.
func HelmEnv(home string) []string {
	return append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
}

// MustBuildHelm is BuildHelm for tests.
func MustBuildHelm(t testing.TB) string {
	t.Helper()
	return mustBuild(t, "build helm", BuildHelm)
}
