package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// An overlay of the base with both kustomize components — monitoring, and the API server endpoint
// from the overlay's nodeaddr-api-server ConfigMap — renders what each promises and applies on the
// API server (with the Prometheus Operator's CRDs).
func TestKustomizeComponentsApply(t *testing.T) {
	harness.RequireE2E(t)
	bins := harness.MustBuild(t)
	dir := t.TempDir()
	rel := func(parts ...string) string {
		r, err := filepath.Rel(dir, harness.DeployFile(parts...))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	overlay := `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ` + rel() + `
components:
  - ` + rel("components", "monitoring") + `
  - ` + rel("components", "api-server-endpoint") + `
configMapGenerator:
  - name: nodeaddr-api-server
    namespace: kube-system
    literals:
      - host=10.0.0.10
      - port=6443
`
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	rendered := run(t, "", bins.Kubectl, "kustomize", dir)
	objs := harness.DecodeDocs(t, rendered)

	// Monitoring: the objects of deploy/monitoring/.
	for _, key := range []string{"Service/kube-system/nodeaddr", "ServiceMonitor/kube-system/nodeaddr",
		"PrometheusRule/kube-system/nodeaddr", "ConfigMap/kube-system/nodeaddr-dashboard"} {
		if _, ok := objs[key]; !ok {
			t.Errorf("the monitoring component does not add %s", key)
		}
	}
	// API server endpoint: the agent's environment names the overlay's endpoint, through the
	// generated (hash-suffixed) ConfigMap.
	ds, ok := objs["DaemonSet/kube-system/nodeaddr"]
	if !ok {
		t.Fatal("no DaemonSet in the overlay's output")
	}
	c, configMaps := harness.RenderedContainer(t, ds, objs)
	env, _ := harness.PodEnv(t, c, "worker-1", configMaps)
	for _, want := range []string{"KUBERNETES_SERVICE_HOST=10.0.0.10", "KUBERNETES_SERVICE_PORT=6443"} {
		if !slices.Contains(env, want) {
			t.Errorf("the agent's environment lacks %s: %v", want, env)
		}
	}
	for _, e := range c.Env {
		if e.Name == "KUBERNETES_SERVICE_HOST" && (e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil ||
			!strings.HasPrefix(e.ValueFrom.ConfigMapKeyRef.Name, "nodeaddr-api-server-")) {
			t.Errorf("KUBERNETES_SERVICE_HOST does not come from the generated ConfigMap: %+v", e)
		}
	}

	harness.ApplyToAPIServer(t, bins.Kubectl, rendered, "nodeaddr-overlay")
}

// The base alone sets no API server endpoint: the component is what adds it.
func TestBaseLeavesTheServiceVIP(t *testing.T) {
	for _, e := range harness.ShippedDaemonSet(t).Spec.Template.Spec.Containers[0].Env {
		if strings.HasPrefix(e.Name, "KUBERNETES_SERVICE_") {
			t.Errorf("deploy/daemonset.yaml sets %s; the api-server-endpoint component should", e.Name)
		}
	}
}
