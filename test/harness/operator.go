package harness

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// PrometheusOperatorVersion is the Prometheus Operator test/monitoring runs: the newest release of
// the module github.com/prometheus-operator/prometheus-operator that the Go module proxy serves
// (later tags exist only for its pkg/apis/monitoring and pkg/client submodules). It builds with Go
// 1.26 unchanged; its example/prometheus-operator-crd/ holds the CRDs the deploy tests install.
const PrometheusOperatorVersion = "v0.85.0"

// PrometheusOperatorModule is the operator's Go module.
const PrometheusOperatorModule = "github.com/prometheus-operator/prometheus-operator"

// BuildPrometheusOperator builds (once, cached by version) the operator's cmd/operator and returns
// its path. The module's go.mod replaces its own submodules (pkg/apis/monitoring, pkg/client) by
// local directories, so `go install …@version` refuses it; the binary is built instead from a
// build module generated under the cache directory, where `go get -tool` adds cmd/operator at
// PrometheusOperatorVersion (the submodules at the same tag, from the proxy): test/go.mod stays on
// its own Kubernetes release. Cold, the module download and build take several minutes on 2
// cores; progress goes to progress.
func BuildPrometheusOperator(progress io.Writer) (string, error) {
	version := PrometheusOperatorVersion
	out := filepath.Join(CacheDir(), "bin", "prometheus-operator-"+version, "operator")
	tool := PrometheusOperatorModule + "/cmd/operator"
	// Static and stripped, with the version the operator logs and reports stamped in.
	pkg := "github.com/prometheus/common/version."
	return out, buildFromProxy(progress, "prometheus-operator/"+version, out, proxyModule{
		name:     "prometheus-operator " + version,
		dir:      "prometheus-operator-" + version,
		module:   "nodeaddr.test/prometheus-operator",
		requires: []string{PrometheusOperatorModule + " " + version, "tool " + tool},
		// `go get -tool` downloads only what cmd/operator imports (about 420 MB of modules; `go mod
		// tidy` would fetch their tests' too, about 1 GB).
		get: []string{"-tool", tool + "@" + version},
		pkg: tool,
		flags: []string{"-trimpath",
			fmt.Sprintf("-ldflags=-s -w -X %sVersion=%s -X %sBranch=%s", pkg, strings.TrimPrefix(version, "v"), pkg, version)},
	})
}

// MustBuildPrometheusOperator is BuildPrometheusOperator for tests.
func MustBuildPrometheusOperator(t testing.TB) string {
	t.Helper()
	return mustBuild(t, "build prometheus-operator", BuildPrometheusOperator)
}

// PrometheusOperatorDir is the directory of the operator's module at PrometheusOperatorVersion in
// the module cache (downloaded if needed, outside any module: test/go.mod is not touched).
func PrometheusOperatorDir() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", PrometheusOperatorModule+"@"+PrometheusOperatorVersion)
	cmd.Dir = os.TempDir()
	b, err := cmd.Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(b, &m); err != nil || jerr != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %v %s", PrometheusOperatorModule, PrometheusOperatorVersion, err, jerr, m.Error)
	}
	return m.Dir, nil
}

// KubeSDPrometheusVersion is the Prometheus module test/cmd/kubesd is built against: the one
// PrometheusOperatorVersion's go.mod requires (v0.305.0 is Prometheus 3.5.0).
const KubeSDPrometheusVersion = "v0.305.0"

// BuildKubeSD builds (once, cached by its source and KubeSDPrometheusVersion) test/cmd/kubesd,
// Prometheus's own Kubernetes service discovery served as HTTP service discovery (Debian's
// Prometheus is built without Kubernetes discovery), and returns its path. It is built in a build
// module of its own under the cache directory: its discovery/kubernetes needs the client-go
// release its Prometheus requires, older than the operator's, and test/go.mod never requires
// Prometheus.
func BuildKubeSD(progress io.Writer) (string, error) {
	src, err := os.ReadFile(filepath.Join(TestModuleDir(), "cmd", "kubesd", "main.go"))
	if err != nil {
		return "", err
	}
	version := KubeSDPrometheusVersion
	out := filepath.Join(CacheDir(), "bin", "kubesd-"+version, fmt.Sprintf("kubesd-%08x", crc32.ChecksumIEEE(src)))
	return out, buildFromProxy(progress, "kubesd/"+out, out, proxyModule{
		name:     "kubesd (Prometheus " + version + ")",
		dir:      "kubesd-" + version,
		module:   "nodeaddr.test/kubesd",
		requires: []string{"github.com/prometheus/prometheus " + version},
		files:    map[string][]byte{"main.go": src},
		get: []string{"github.com/prometheus/prometheus/discovery@" + version,
			"github.com/prometheus/prometheus/discovery/kubernetes@" + version, "gopkg.in/yaml.v2"},
		pkg:   ".",
		flags: []string{"-tags=kubesd", "-trimpath", "-ldflags=-s -w"},
	})
}

// MustBuildKubeSD is BuildKubeSD for tests.
func MustBuildKubeSD(t testing.TB) string {
	t.Helper()
	return mustBuild(t, "build kubesd", BuildKubeSD)
}
