package deploy

import (
	"os"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/pkg/generated/openapi"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The policy's expressions type-check against the Node schema of the pinned Kubernetes release, as
// kube-controller-manager's policy status controller would report them (a misspelt field would
// otherwise show only at runtime, as a denial of every write).
func TestAdmissionPolicyTypeChecks(t *testing.T) {
	data, err := os.ReadFile(deployFile("admission-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	tc := &validating.TypeChecker{
		SchemaResolver: resolver.NewDefinitionsSchemaResolver(openapi.GetOpenAPIDefinitions, scheme.Scheme),
		RestMapper:     testrestmapper.TestOnlyStaticRESTMapper(scheme.Scheme),
	}
	var policies, bindings int
	for _, o := range objs {
		switch o := o.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			policies++
			if o.Name != policyName {
				t.Errorf("policy name %q, want %q", o.Name, policyName)
			}
			for _, w := range tc.Check(o) {
				t.Errorf("%s: %s", w.FieldRef, w.Warning)
			}
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			bindings++
			if o.Spec.PolicyName != policyName {
				t.Errorf("binding %s binds %q, want %q", o.Name, o.Spec.PolicyName, policyName)
			}
		}
	}
	if policies != 1 || bindings != 1 {
		t.Fatalf("admission-policy.yaml: %d policies and %d bindings, want 1 and 1", policies, bindings)
	}
}
