package deploy

import (
	"os"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodeaddr/nodeaddr/test/harness"
	"github.com/nodeaddr/nodeaddr/test/harness/celcheck"
)

// The policies compile on the oldest supported API server, 1.30, which checks new expressions at
// the 1.29 CEL level (a policy it cannot compile is rejected, leaving its binding enforcing nothing).
// The control shows the check bites: isIP() (1.30) does not compile at that level.
func TestAdmissionPoliciesCompileOnKubernetes130(t *testing.T) {
	data, err := os.ReadFile(harness.DeployFile("admission-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	at129 := version.MajorMinor(1, 29)
	n := 0
	for _, o := range objs {
		p, ok := o.(*admissionv1.ValidatingAdmissionPolicy)
		if !ok {
			continue
		}
		n++
		for _, e := range celcheck.CompileAt(t, at129, p) {
			t.Errorf("%s at the 1.29 CEL level: %s", p.Name, e)
		}
		control := p.DeepCopy()
		control.Spec.Validations = append(control.Spec.Validations, admissionv1.Validation{Expression: "isIP(object.metadata.name)"})
		if errs := celcheck.CompileAt(t, at129, control); len(errs) != 1 {
			t.Errorf("control: isIP() at the 1.29 level gave %d errors, want 1: %v", len(errs), errs)
		}
		if errs := celcheck.CompileAt(t, version.MajorMinor(1, 31), control); len(errs) != 0 {
			t.Errorf("control: isIP() at the 1.31 level: %v", errs)
		}
	}
	if n != 2 {
		t.Fatalf("%d policies, want 2", n)
	}
}
