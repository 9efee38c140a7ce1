package monitoring

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The kube-prometheus-stack ServiceAccount names of docs/kube-prometheus-stack.md's table, as the
// stack's chart derives them from the release name.
func TestStackScraperNames(t *testing.T) {
	for release, want := range map[string]string{
		"kube-prometheus-stack":            "kube-prometheus-stack-prometheus",
		"prometheus":                       "prometheus-kube-prometheus-prometheus",
		"monitoring":                       "monitoring-kube-prometheus-prometheus",
		"kps":                              "kps-kube-prometheus-stack-prometheus",
		"my-kube-prometheus-stack-release": "my-kube-prometheus-stack-r-prometheus",
		"abcd":                             "abcd-kube-prometheus-stack-prometheus",
		"abcde":                            "abcde-kube-prometheus-stac-prometheus",
	} {
		if got := stackScraper("monitoring", release); got != "system:serviceaccount:monitoring:"+want {
			t.Errorf("release %s: %s, want %s", release, got, want)
		}
	}
	doc, err := os.ReadFile(repoFile("docs", "kube-prometheus-stack.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for line := range strings.Lines(string(doc)) {
		cells := strings.Split(line, "|")
		if len(cells) != 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		release, sa := strings.Trim(strings.TrimSpace(cells[1]), "`"), strings.Trim(strings.TrimSpace(cells[2]), "`")
		rows++
		if got := stackScraper("monitoring", release); got != "system:serviceaccount:monitoring:"+sa {
			t.Errorf("docs/kube-prometheus-stack.md: release %s names %s, the stack's chart %s", release, sa, got)
		}
	}
	if rows < 3 {
		t.Errorf("docs/kube-prometheus-stack.md: %d rows of release names, want the table", rows)
	}
}

// monitoring.kubePrometheusStack.release alone turns monitoring on, labels the ServiceMonitors and
// the PrometheusRule `release: <name>` and adds the stack's Prometheus ServiceAccount to the
// allowed scrapers; namespace and fullnameOverride follow the stack's. Without it nothing changes.
func TestKubePrometheusStackValue(t *testing.T) {
	defaultList := "system:serviceaccount:monitoring:prometheus-k8s,system:serviceaccount:monitoring:kube-prometheus-stack-prometheus"
	monitored := []string{"ServiceMonitor/kube-system/nodeaddr", "ServiceMonitor/kube-system/nodeaddr-approver",
		"PrometheusRule/kube-system/nodeaddr", "Service/kube-system/nodeaddr", "ConfigMap/kube-system/nodeaddr-dashboard"}
	for _, c := range []struct {
		name    string
		args    []string
		release string // the release label expected on the ServiceMonitors and the PrometheusRule
		list    string // metrics-allowed-scrapers
		sar     bool   // the ClusterRole grants subjectaccessreviews
	}{
		{"kube-prometheus-stack", []string{"--set", "monitoring.kubePrometheusStack.release=kube-prometheus-stack"}, "kube-prometheus-stack", defaultList, false},
		{"prometheus", []string{"--set", "monitoring.kubePrometheusStack.release=prometheus"}, "prometheus",
			defaultList + ",system:serviceaccount:monitoring:prometheus-kube-prometheus-prometheus", false},
		{"kps in obs", []string{"--set", "monitoring.kubePrometheusStack.release=kps", "--set", "monitoring.kubePrometheusStack.namespace=obs"}, "kps",
			defaultList + ",system:serviceaccount:obs:kps-kube-prometheus-stack-prometheus", false},
		{"fullnameOverride, own list emptied", []string{"--set", "monitoring.kubePrometheusStack.release=kps",
			"--set", "monitoring.kubePrometheusStack.fullnameOverride=mon", "--set", "config.metricsAllowedScrapers=null"}, "kps",
			"system:serviceaccount:monitoring:mon-prometheus", false},
		{"no value", []string{"--set", "monitoring.enabled=true"}, "", defaultList, false},
		{"no value, list emptied", []string{"--set", "monitoring.enabled=true", "--set", "config.metricsAllowedScrapers=null"}, "", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rendered := helmTemplate(t, c.args...)
			objs := decodeDocs(t, rendered)
			for _, key := range monitored {
				o, ok := objs[key]
				if !ok {
					t.Errorf("%s not rendered", key)
					continue
				}
				if !strings.HasPrefix(key, "ServiceMonitor/") && !strings.HasPrefix(key, "PrometheusRule/") {
					continue
				}
				if rel, has := labels(o)["release"]; (c.release == "" && has) || (c.release != "" && rel != c.release) {
					t.Errorf("%s: label release=%v, want %q", key, rel, c.release)
				}
			}
			if got := objs["ConfigMap/kube-system/nodeaddr"]["data"].(object)["metrics-allowed-scrapers"]; got != c.list {
				t.Errorf("metrics-allowed-scrapers %q, want %q", got, c.list)
			}
			cr, ok := objs["ClusterRole//nodeaddr"]
			if !ok {
				t.Fatal("no ClusterRole nodeaddr")
			}
			if got := strings.Contains(fmt.Sprint(cr["rules"]), "subjectaccessreviews"); got != c.sar {
				t.Errorf("the ClusterRole grants subjectaccessreviews: %v, want %v", got, c.sar)
			}
		})
	}
}

// The kustomize component labels what deploy/monitoring holds and prepends the overlay's scraper
// to the allowed ones, from the overlay's local-config ConfigMap, which is not applied; without
// that ConfigMap the build fails.
func TestKubePrometheusStackComponent(t *testing.T) {
	kubectl := harness.MustBuild(t).Kubectl
	dir := t.TempDir()
	rel := func(parts ...string) string {
		r, err := filepath.Rel(dir, repoFile(append([]string{"deploy"}, parts...)...))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	overlay := func(withConfig bool) string {
		res := "  - " + rel() + "\n"
		if withConfig {
			res += "  - kube-prometheus-stack.yaml\n"
		}
		return "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n" + res +
			"components:\n  - " + rel("components", "kube-prometheus-stack") + "\n"
	}
	scraper := stackScraper("monitoring", "prometheus")
	if err := os.WriteFile(filepath.Join(dir, "kube-prometheus-stack.yaml"), []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: nodeaddr-kube-prometheus-stack
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  release: prometheus
  scraper: `+scraper+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay(true)), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := decodeDocs(t, harness.Run(t, "", kubectl, "kustomize", dir))
	for _, key := range []string{"ServiceMonitor/kube-system/nodeaddr", "ServiceMonitor/kube-system/nodeaddr-approver", "PrometheusRule/kube-system/nodeaddr"} {
		o, ok := objs[key]
		if !ok {
			t.Errorf("%s not rendered", key)
		} else if rel := labels(o)["release"]; rel != "prometheus" {
			t.Errorf("%s: label release=%v, want prometheus", key, rel)
		}
	}
	for _, key := range []string{"Service/kube-system/nodeaddr", "ConfigMap/kube-system/nodeaddr-dashboard", "DaemonSet/kube-system/nodeaddr"} {
		if _, ok := objs[key]; !ok {
			t.Errorf("%s not rendered", key)
		}
	}
	if _, ok := objs["ConfigMap//nodeaddr-kube-prometheus-stack"]; ok {
		t.Error("the local-config ConfigMap is in the output")
	}
	list := objs["ConfigMap/kube-system/nodeaddr"]["data"].(object)["metrics-allowed-scrapers"].(string)
	if l := strings.Split(list, ","); l[0] != scraper || !slices.Contains(l, "system:serviceaccount:monitoring:prometheus-k8s") {
		t.Errorf("metrics-allowed-scrapers %q: want %s first, then the base's", list, scraper)
	}

	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay(false)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := execOutput(kubectl, "kustomize", dir)
	if err == nil || !strings.Contains(out, "nodeaddr-kube-prometheus-stack") {
		t.Errorf("without the overlay's ConfigMap: %v\n%s\nwant a failure naming it", err, out)
	}
}

// execOutput runs name with args and returns its combined output.
func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
