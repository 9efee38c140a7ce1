package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// config.approveKubeletServingCsr=true renders what the base with the kubelet-serving-csr component
// renders: the flag, the RBAC (ClusterRole, ClusterRoleBinding, the Role and RoleBinding in
// default) and the admission policy with its binding; the default render has none of them.
func TestHelmKubeletServingCSRMatchesKustomize(t *testing.T) {
	harness.RequireE2E(t)
	rendered := componentOverlay(t, "kubelet-serving-csr")
	on := helmTemplate(t, "--set", "config.approveKubeletServingCsr=true")
	compareRenders(t, on, rendered)
	objs, off := decodeDocs(t, on), decodeDocs(t, helmTemplate(t))
	for _, key := range []string{"ClusterRole/<nil>/nodeaddr-kubelet-serving-csr", "ClusterRoleBinding/<nil>/nodeaddr-kubelet-serving-csr",
		"Role/default/nodeaddr-kubelet-serving-csr", "RoleBinding/default/nodeaddr-kubelet-serving-csr",
		"ValidatingAdmissionPolicy/<nil>/nodeaddr-kubelet-serving-csr", "ValidatingAdmissionPolicyBinding/<nil>/nodeaddr-kubelet-serving-csr"} {
		if _, ok := objs[key]; !ok {
			t.Errorf("config.approveKubeletServingCsr=true does not render %s", key)
		}
		if _, ok := off[key]; ok {
			t.Errorf("the default render has %s", key)
		}
	}
	if args := renderedArgs(t, objs); !slices.Contains(args, "--approve-kubelet-serving-csr=true") {
		t.Errorf("args lack --approve-kubelet-serving-csr=true: %v", args)
	}
	if args := defaultArgs(t); !slices.Contains(args, "--approve-kubelet-serving-csr=false") {
		t.Errorf("default args lack --approve-kubelet-serving-csr=false: %v", args)
	}
	// Another namespace and name: the policy and the bindings name that agent.
	moved := decodeDocs(t, helmTemplate(t, "--set", "config.approveKubeletServingCsr=true", "--set", "fullnameOverride=addr", "--namespace", "infra"))
	p, ok := moved["ValidatingAdmissionPolicy/<nil>/addr-kubelet-serving-csr"]
	if !ok {
		t.Fatal("fullnameOverride=addr: no policy addr-kubelet-serving-csr")
	}
	spec := p["spec"].(object)
	exprs := []any{spec["matchConditions"].([]any)[0].(object)["expression"], spec["variables"].([]any)[0].(object)["expression"]}
	for _, e := range exprs {
		if !strings.Contains(fmt.Sprint(e), `'system:serviceaccount:' + 'infra' + ':' + 'addr'`) {
			t.Errorf("the moved policy's expression does not name system:serviceaccount:infra:addr: %v", e)
		}
	}
	for _, key := range []string{"ClusterRoleBinding/<nil>/addr-kubelet-serving-csr", "RoleBinding/default/addr-kubelet-serving-csr"} {
		b, ok := moved[key]
		if !ok {
			t.Fatalf("no %s", key)
		}
		if s := b["subjects"].([]any)[0].(object); s["namespace"] != "infra" || s["name"] != "addr" {
			t.Errorf("%s subject %v, want infra/addr", key, s)
		}
	}
}

// componentOverlay renders the base with the components named (under deploy/components).
func componentOverlay(t *testing.T, components ...string) string {
	t.Helper()
	dir := t.TempDir()
	rel := func(parts ...string) string {
		r, err := filepath.Rel(dir, deployFile(parts...))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel() + "\ncomponents:\n"
	for _, c := range components {
		k += "  - " + rel("components", c) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return run(t, "", harness.MustBuild(t).Kubectl, "kustomize", dir)
}

// The component's policy has no parameter, answers 403 for every validation, type-checks against
// the CertificateSigningRequest schema of the pinned release, and compiles at the 1.29 CEL level a
// 1.30 API server checks new expressions at.
func TestKubeletServingCSRPolicyChecks(t *testing.T) {
	data, err := os.ReadFile(deployFile("components", "kubelet-serving-csr", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	tc := policyTypeChecker()
	n := 0
	for _, o := range objs {
		p, ok := o.(*admissionv1.ValidatingAdmissionPolicy)
		if !ok {
			continue
		}
		n++
		checkPolicyShape(t, tc, p)
		for _, e := range compileAt(t, version.MajorMinor(1, 29), p) {
			t.Errorf("%s at the 1.29 CEL level: %s", p.Name, e)
		}
	}
	if n != 1 {
		t.Fatalf("%d policies in the component, want 1", n)
	}
}

// The base with the component applies on the API server (server-side dry run, then for real), the
// policy's expressions compile there, and its replacements left the agent's username intact.
func TestKubeletServingCSRComponentApplies(t *testing.T) {
	harness.RequireE2E(t)
	rendered := componentOverlay(t, "kubelet-serving-csr")
	cp, _ := applyToAPIServer(t, harness.MustBuild(t).Kubectl, rendered, "nodeaddr-overlay")
	p, err := cp.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(context.Background(), "nodeaddr-kubelet-serving-csr", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := p.Spec.Variables[0]; v.Name != "agentUser" || v.Expression != "'system:serviceaccount:' + 'kube-system' + ':' + 'nodeaddr'" {
		t.Errorf("agentUser after the replacements: %+v", v)
	}
}
