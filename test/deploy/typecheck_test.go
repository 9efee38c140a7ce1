package deploy

import (
	"os"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/pkg/generated/openapi"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The policies have no parameter, every validation answers 403, and the expressions type-check against the Node schema of the pinned Kubernetes release, as
// kube-controller-manager's policy status controller would report them (a misspelt field would
// otherwise show only at runtime, as a denial of every write).
func TestAdmissionPolicyTypeChecks(t *testing.T) {
	data, err := os.ReadFile(harness.DeployFile("admission-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	tc := policyTypeChecker()
	var policies, bindings []string
	for _, o := range objs {
		switch o := o.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			policies = append(policies, o.Name)
			checkPolicyShape(t, tc, o)
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			bindings = append(bindings, o.Spec.PolicyName)
			if o.Name != o.Spec.PolicyName || o.Spec.ParamRef != nil {
				t.Errorf("binding %s binds %q with paramRef %v, want its namesake and no parameter", o.Name, o.Spec.PolicyName, o.Spec.ParamRef)
			}
		}
	}
	want := []string{harness.PolicyName, eventsPolicyName}
	if !slices.Equal(policies, want) || !slices.Equal(bindings, want) {
		t.Fatalf("admission-policy.yaml: policies %v and bindings %v, want %v", policies, bindings, want)
	}
}

// policyTypeChecker type-checks policies against the schemas of the pinned release, as
// kube-controller-manager's policy status controller does.
func policyTypeChecker() *validating.TypeChecker {
	return &validating.TypeChecker{
		SchemaResolver: resolver.NewDefinitionsSchemaResolver(openapi.GetOpenAPIDefinitions, scheme.Scheme),
		RestMapper:     testrestmapper.TestOnlyStaticRESTMapper(scheme.Scheme),
	}
}

// checkPolicyShape fails t for a policy with a parameter (a missing one would block every writer
// or unconfine the agent), a validation without reason Forbidden (a 422 would look like a failed
// JSON-patch test), or an expression that does not type-check.
func checkPolicyShape(t *testing.T, tc *validating.TypeChecker, p *admissionv1.ValidatingAdmissionPolicy) {
	t.Helper()
	if p.Spec.ParamKind != nil {
		t.Errorf("policy %s has a paramKind", p.Name)
	}
	for _, v := range p.Spec.Validations {
		if v.Reason == nil || *v.Reason != "Forbidden" {
			t.Errorf("policy %s: validation %q lacks reason: Forbidden", p.Name, v.Expression)
		}
	}
	for _, w := range tc.Check(p) {
		t.Errorf("%s: %s: %s", p.Name, w.FieldRef, w.Warning)
	}
}
