package remediation

import (
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeaddr/nodeaddr/test/harness"
	"github.com/nodeaddr/nodeaddr/test/harness/celcheck"
)

// remediationKeys are the objects the pod-remediation component adds (and remediator.enabled).
func remediationKeys(name, ns string) []string {
	return []string{
		"ClusterRole/<nil>/" + name + "-pod-remediation", "ClusterRoleBinding/<nil>/" + name + "-pod-remediation",
		"Role/default/" + name + "-pod-remediation", "RoleBinding/default/" + name + "-pod-remediation",
		"Role/" + ns + "/" + name + "-remediator", "RoleBinding/" + ns + "/" + name + "-remediator",
		"Deployment/" + ns + "/" + name + "-remediator",
		"ValidatingAdmissionPolicy/<nil>/" + name + "-remediator", "ValidatingAdmissionPolicyBinding/<nil>/" + name + "-remediator",
		"ValidatingAdmissionPolicy/<nil>/" + name + "-remediator-lease", "ValidatingAdmissionPolicyBinding/<nil>/" + name + "-remediator-lease",
		"ValidatingAdmissionPolicy/<nil>/" + name + "-remediator-events", "ValidatingAdmissionPolicyBinding/<nil>/" + name + "-remediator-events",
	}
}

// remediator.enabled=true renders what the base with the pod-remediation component renders; the
// default render and the base have none of it but the ServiceAccount (deploy/wiring reads it).
func TestHelmPodRemediationMatchesKustomize(t *testing.T) {
	harness.RequireE2E(t)
	rendered := harness.ComponentOverlay(t, "pod-remediation")
	on := harness.HelmTemplate(t, "--set", "remediator.enabled=true")
	harness.CompareRenders(t, on, rendered)
	objs, off := harness.DecodeDocs(t, on), harness.DecodeDocs(t, harness.HelmTemplate(t))
	base := harness.DecodeDocs(t, harness.Kustomize(t, harness.DeployFile()))
	for _, key := range remediationKeys("nodeaddr", "kube-system") {
		if _, ok := objs[key]; !ok {
			t.Errorf("remediator.enabled=true does not render %s", key)
		}
		if _, ok := off[key]; ok {
			t.Errorf("the default render has %s", key)
		}
		if _, ok := base[key]; ok {
			t.Errorf("the kustomize base has %s", key)
		}
	}
	for what, o := range map[string]map[string]any{"the kustomize base": anyMap(base), "the default render": anyMap(off)} {
		if _, ok := o["ServiceAccount/kube-system/nodeaddr-remediator"]; !ok {
			t.Errorf("%s lacks ServiceAccount nodeaddr-remediator", what)
		}
	}
	// Approving and evicting are separate rights: neither component renders the other's objects.
	csr := harness.DecodeDocs(t, harness.ComponentOverlay(t, "kubelet-serving-csr"))
	for _, key := range remediationKeys("nodeaddr", "kube-system") {
		if _, ok := csr[key]; ok {
			t.Errorf("the kubelet-serving-csr component renders %s", key)
		}
	}
}

func anyMap[V any](m map[string]V) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// The component's policies have no parameter, answer 403 for every validation, type-check against
// the schemas of the pinned release (an Eviction's deleteOptions on pods/eviction), and compile at
// the 1.29 CEL level; each binding binds its namesake.
func TestPodRemediationPolicyChecks(t *testing.T) {
	policies, objs := celcheck.CheckPolicyFile(t, version.MajorMinor(1, 29), "components", "pod-remediation", "policy.yaml")
	var bindings []string
	for _, o := range objs {
		bindings = append(bindings, o.Spec.PolicyName)
		if o.Name != o.Spec.PolicyName || o.Spec.ParamRef != nil || !slices.Equal(o.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
			t.Errorf("binding %s binds %q with paramRef %v and actions %v", o.Name, o.Spec.PolicyName, o.Spec.ParamRef, o.Spec.ValidationActions)
		}
	}
	want := []string{"nodeaddr-remediator", "nodeaddr-remediator-lease", "nodeaddr-remediator-events"}
	if !slices.Equal(policies, want) || !slices.Equal(bindings, want) {
		t.Fatalf("the component's policies %v and bindings %v, want %v", policies, bindings, want)
	}
}
