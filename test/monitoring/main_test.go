// Package monitoring proves that nodeaddr works with kube-prometheus-stack with one value
// (docs/kube-prometheus-stack.md): the chart's and the kustomize component's rendering, and, with
// real parts, the Prometheus Operator built from its Go module selecting nodeaddr's ServiceMonitor
// and PrometheusRule on a real kube-apiserver, and Debian's Prometheus running the configuration
// the operator generated against a real agent.
package monitoring

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }

// object is one decoded manifest.
type object = map[string]any

// repoFile is the path of a file of the repository.
func repoFile(parts ...string) string {
	return filepath.Join(append([]string{harness.RepoDir()}, parts...)...)
}

// helmTemplate renders deploy/helm/nodeaddr as `helm install nodeaddr deploy/helm/nodeaddr -n
// kube-system --set image.tag=test` would (a development chart refuses its unpublished default
// image), with extra arguments (--set ...).
func helmTemplate(t *testing.T, extra ...string) string {
	t.Helper()
	helm := harness.MustBuildHelm(t)
	home := t.TempDir()
	args := append([]string{"template", "nodeaddr", repoFile("deploy", "helm", "nodeaddr"), "--namespace", "kube-system", "--skip-tests",
		"--set", "image.tag=test"}, extra...)
	cmd := exec.Command(helm, args...)
	cmd.Env = harness.HelmEnv(home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// decodeDocs splits multi-document YAML into objects keyed by kind/namespace/name.
func decodeDocs(t *testing.T, data string) map[string]object {
	t.Helper()
	out := map[string]object{}
	for _, o := range harness.DecodeYAMLDocs(t, data) {
		md, _ := o["metadata"].(object)
		ns, _ := md["namespace"].(string)
		name, _ := md["name"].(string)
		out[fmt.Sprintf("%s/%s/%s", o["kind"], ns, name)] = o
	}
	return out
}

// labels returns an object's metadata.labels.
func labels(o object) map[string]any {
	md, _ := o["metadata"].(object)
	l, _ := md["labels"].(object)
	return l
}

// stackScraper is the username of kube-prometheus-stack's Prometheus ServiceAccount for a release
// in namespace, as that chart names it (templates/_helpers.tpl there:
// kube-prometheus-stack.prometheus.serviceAccountName, "<fullname>-prometheus", where fullname is
// the release name if it contains the chart name, else RELEASE-kube-prometheus-stack, cut to 26
// characters without a trailing "-").
func stackScraper(namespace, release string) string {
	full := release
	if !strings.Contains(release, "kube-prometheus-stack") {
		full = release + "-kube-prometheus-stack"
	}
	if len(full) > 26 {
		full = full[:26]
	}
	full = strings.TrimSuffix(full, "-")
	return "system:serviceaccount:" + namespace + ":" + full + "-prometheus"
}

// tokenSnippet is the block of kube-prometheus-stack values that docs/kube-prometheus-stack.md
// tells users to set: the yaml block after the marker comment.
type tokenSnippet struct {
	Prometheus struct {
		PrometheusSpec struct {
			Volumes      []map[string]any `json:"volumes"`
			VolumeMounts []map[string]any `json:"volumeMounts"`
		} `json:"prometheusSpec"`
	} `json:"prometheus"`
}

const snippetMarker = "<!-- test/monitoring reads the next yaml block"

// readTokenSnippet reads and decodes that block (strictly: it holds nothing else).
func readTokenSnippet(t *testing.T) (tokenSnippet, string) {
	t.Helper()
	b, err := os.ReadFile(repoFile("docs", "kube-prometheus-stack.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), snippetMarker)
	if !ok {
		t.Fatalf("docs/kube-prometheus-stack.md has no %q", snippetMarker)
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	if !ok {
		t.Fatal("docs/kube-prometheus-stack.md: no yaml block after the marker")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/kube-prometheus-stack.md: the yaml block after the marker is not closed")
	}
	var s tokenSnippet
	if err := yaml.UnmarshalStrict([]byte(block), &s); err != nil {
		t.Fatalf("docs/kube-prometheus-stack.md's values block: %v\n%s", err, block)
	}
	if len(s.Prometheus.PrometheusSpec.Volumes) == 0 || len(s.Prometheus.PrometheusSpec.VolumeMounts) == 0 {
		t.Fatalf("docs/kube-prometheus-stack.md's values block has no volumes or volumeMounts:\n%s", block)
	}
	return s, block
}
