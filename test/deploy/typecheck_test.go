package deploy

import (
	"slices"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
	"github.com/nodeaddr/nodeaddr/test/harness/celcheck"
)

// The policies have no parameter, every validation answers 403, and the expressions type-check against the Node schema of the pinned Kubernetes release, as
// kube-controller-manager's policy status controller would report them (a misspelt field would
// otherwise show only at runtime, as a denial of every write).
func TestAdmissionPolicyTypeChecks(t *testing.T) {
	policies, objs := celcheck.CheckPolicyFile(t, nil, "admission-policy.yaml")
	var bindings []string
	for _, o := range objs {
		bindings = append(bindings, o.Spec.PolicyName)
		if o.Name != o.Spec.PolicyName || o.Spec.ParamRef != nil {
			t.Errorf("binding %s binds %q with paramRef %v, want its namesake and no parameter", o.Name, o.Spec.PolicyName, o.Spec.ParamRef)
		}
	}
	want := []string{harness.PolicyName, eventsPolicyName}
	if !slices.Equal(policies, want) || !slices.Equal(bindings, want) {
		t.Fatalf("admission-policy.yaml: policies %v and bindings %v, want %v", policies, bindings, want)
	}
}
