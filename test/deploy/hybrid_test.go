package deploy

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// managedLabel is the label of the hybrid-cluster component and of docs/hybrid-clusters.md.
const managedLabel = "nodeaddr.io/managed"

// A hybrid cluster (docs/hybrid-clusters.md): the base with the hybrid-cluster component applies
// on the API server, and the DaemonSet the server stored places an agent on the labelled bare-metal
// Node only, not on a cloud controller manager's Node nor on an unlabelled one. Placement is
// decided by the code the DaemonSet controller itself uses (component-helpers' node affinity,
// which covers the nodeSelector). The chart with the documented value renders the same selector.
func TestHybridClusterKeepsNodeaddrOffCloudNodes(t *testing.T) {
	harness.RequireE2E(t)
	bins := harness.MustBuild(t)
	dir := t.TempDir()
	base, err := filepath.Rel(dir, harness.DeployFile())
	if err != nil {
		t.Fatal(err)
	}
	overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + base +
		"\ncomponents:\n  - " + filepath.Join(base, "components", "hybrid-cluster") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	rendered := run(t, "", bins.Kubectl, "kustomize", dir)
	cp, _ := harness.ApplyToAPIServer(t, bins.Kubectl, rendered, "nodeaddr-hybrid")

	ctx := context.Background()
	linux := map[string]string{"kubernetes.io/os": "linux"}
	with := func(extra map[string]string) map[string]string {
		l := maps.Clone(linux)
		maps.Copy(l, extra)
		return l
	}
	nodes := []struct {
		node corev1.Node
		want bool
	}{
		{corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "metal-1", Labels: with(map[string]string{managedLabel: "true"})}}, true},
		{corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cloud-1",
			Labels: with(map[string]string{"node.kubernetes.io/instance-type": "m7g.large", "topology.kubernetes.io/zone": "eu-west-1a"})},
			Spec: corev1.NodeSpec{ProviderID: "aws:///eu-west-1a/i-0123456789abcdef0"}}, false},
		{corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "metal-unlabelled", Labels: linux}}, false},
		{corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "metal-opted-out", Labels: with(map[string]string{managedLabel: "false"})}}, false},
	}
	for _, n := range nodes {
		n.node.Spec.Taints = []corev1.Taint{harness.Uninitialized}
		if _, err := cp.Admin.CoreV1().Nodes().Create(ctx, &n.node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := cp.Admin.AppsV1().DaemonSets("kube-system").Get(ctx, "nodeaddr", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	required := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: ds.Spec.Template.Spec})
	for _, n := range nodes {
		stored, err := cp.Admin.CoreV1().Nodes().Get(ctx, n.node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := required.Match(stored)
		if err != nil {
			t.Fatal(err)
		}
		if got != n.want {
			t.Errorf("Node %s: the DaemonSet places an agent there = %v, want %v", n.node.Name, got, n.want)
		}
	}

	// The chart: the documented value gives the same selector as the component.
	objs := harness.DecodeDocs(t, harness.HelmTemplate(t, "--set-string", `nodeSelector.nodeaddr\.io/managed=true`))
	chartDS, ok := objs["DaemonSet/kube-system/nodeaddr"]
	if !ok {
		t.Fatal("the chart renders no DaemonSet")
	}
	sel, _ := dig(chartDS, "spec", "template", "spec", "nodeSelector").(map[string]any)
	chartSel := map[string]string{}
	for k, v := range sel {
		chartSel[k], _ = v.(string)
	}
	if !maps.Equal(chartSel, ds.Spec.Template.Spec.NodeSelector) {
		t.Errorf("chart nodeSelector %v, the component's %v", chartSel, ds.Spec.Template.Spec.NodeSelector)
	}
}

// dig returns the value at path in a decoded object, or nil.
func dig(o any, path ...string) any {
	for _, p := range path {
		m, ok := o.(map[string]any)
		if !ok {
			return nil
		}
		o = m[p]
	}
	return o
}
