package matrix

import (
	"context"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// ipLibraryMinor is the first minor whose API server accepts isIP() and cidr() in a new policy: the
// library arrived in 1.30, and a server compiles new expressions at the previous minor's CEL
// compatibility level. A policy that uses them needs at least this release.
const ipLibraryMinor = 31

// checkIPLibrary creates (dry run) a policy using isIP() and cidr() and checks that the release
// accepts it exactly when its minor is at least ipLibraryMinor: the evidence for the minimum
// Kubernetes release of a policy using them.
func checkIPLibrary(t *testing.T, cp *harness.ControlPlane, version string) {
	minor, err := strconv.Atoi(strings.Split(version, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	fail := admissionv1.Fail
	p := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "matrix-ip-library"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}}}}}},
			Validations: []admissionv1.Validation{{Expression: "isIP('192.0.2.1') && cidr('192.0.2.0/24').containsIP('192.0.2.1')"}},
		},
	}
	_, err = cp.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(context.Background(), p,
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case minor >= ipLibraryMinor && err != nil:
		t.Errorf("%s rejects a policy using isIP()/cidr(): %v", version, err)
	case minor < ipLibraryMinor && err == nil:
		t.Errorf("%s accepts a policy using isIP()/cidr(), want a rejection below 1.%d", version, ipLibraryMinor)
	case err != nil:
		t.Logf("%s rejects isIP()/cidr() in a new policy (a policy using them needs 1.%d+): %v", version, ipLibraryMinor, err)
	}
}
