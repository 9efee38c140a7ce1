package conflicts

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The component renders over the base: the detector's Deployment runs the DaemonSet's image (an
// overlay's `images:` tag) as `nodeaddr conflicts` with its own ServiceAccount, and its three
// policies come with it; an overlay that moves the install and lists deploy/wiring builds too.
func TestComponentRenders(t *testing.T) {
	harness.RequireE2E(t)
	bins := harness.MustBuild(t)
	deploy := filepath.Join(harness.RepoDir(), "deploy")
	render := func(extra string) []byte {
		t.Helper()
		dir := t.TempDir()
		base, err := filepath.Rel(dir, deploy) // kustomize takes no absolute path
		if err != nil {
			t.Fatal(err)
		}
		extra = strings.ReplaceAll(extra, "DEPLOY", base)
		k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + base +
			"\ncomponents:\n  - " + filepath.Join(base, "components", "address-conflicts") +
			"\nimages:\n  - name: ghcr.io/nodeaddr/nodeaddr\n    newTag: v9.9.9\n" + extra
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bins.Kubectl, "kustomize", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl kustomize: %v\n%s", err, out)
		}
		return out
	}
	objs, err := harness.DecodeManifests(render(""))
	if err != nil {
		t.Fatal(err)
	}
	var images []string
	var policies []string
	var dep *appsv1.Deployment
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.DaemonSet:
			images = append(images, o.Spec.Template.Spec.Containers[0].Image)
		case *appsv1.Deployment:
			dep = o
		case *admissionv1.ValidatingAdmissionPolicy:
			if strings.HasPrefix(o.Name, "nodeaddr-conflicts") {
				policies = append(policies, o.Name)
			}
		case *corev1.ServiceAccount:
			images = append(images, "sa:"+o.Namespace+"/"+o.Name)
		}
	}
	if dep == nil || dep.Name != "nodeaddr-conflicts" {
		t.Fatalf("no Deployment nodeaddr-conflicts: %v", dep)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != "ghcr.io/nodeaddr/nodeaddr:v9.9.9" || !slices.Contains(images, c.Image) || len(c.Args) == 0 || c.Args[0] != "conflicts" ||
		dep.Spec.Template.Spec.ServiceAccountName != "nodeaddr-conflicts" || !slices.Contains(images, "sa:kube-system/nodeaddr-conflicts") {
		t.Errorf("Deployment: image %s args %v ServiceAccount %s; DaemonSet images and ServiceAccounts %v", c.Image, c.Args,
			dep.Spec.Template.Spec.ServiceAccountName, images)
	}
	slices.Sort(policies)
	if !slices.Equal(policies, []string{"nodeaddr-conflicts-events", "nodeaddr-conflicts-lease", "nodeaddr-conflicts-node"}) {
		t.Errorf("policies %v", policies)
	}
	render("namespace: nodeaddr-system\ntransformers:\n  - " + filepath.Join("DEPLOY", "wiring") + "\n")
}
