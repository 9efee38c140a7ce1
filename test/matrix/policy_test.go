package matrix

import (
	"context"
	"os"
	"slices"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/admission"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// claimNode is the Node of the token whose node claim checkNodeClaim asks about.
const claimNode = "claim-node"

// checkPolicyTable runs the admission policy's table, admission.Table (test/admission/table.go,
// the same cases test/deploy runs on the pinned release), on this release: every release of the
// matrix must give the same answers. First it checks that the release puts the node in the agent's
// pod-bound token, without which no case can pass. On the pinned release test/deploy's
// TestAdmission runs the same table in the same `make test`, so the matrix does not run it twice.
func checkPolicyTable(t *testing.T, cp *harness.ControlPlane, version string) {
	cp.CreateNode(t, harness.NodeSpec{Name: claimNode})
	checkNodeClaim(t, cp, cp.AgentToken(t, claimNode))
	if version == harness.KubernetesVersion && os.Getenv("NODEADDR_MATRIX_FULL") == "" {
		t.Logf("%s: admission.Table runs in test/deploy (TestAdmission); NODEADDR_MATRIX_FULL=1 runs it here too", version)
		return
	}
	admission.Run(t, cp, admission.Table)
}

// checkNodeClaim asks the API server who the agent's pod-bound token is: the policies confine the
// agent through the node name in it (ServiceAccountTokenPodNodeInfo, beta and on by default in 1.30
// and 1.31, GA in 1.32). Without it no release can meet the README's promise.
func checkNodeClaim(t *testing.T, cp *harness.ControlPlane, token string) {
	t.Helper()
	tr, err := cp.Admin.AuthenticationV1().TokenReviews().Create(context.Background(),
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const claim = "authentication.kubernetes.io/node-name"
	if got := tr.Status.User.Extra[claim]; !tr.Status.Authenticated || !slices.Equal(got, authnv1.ExtraValue{claimNode}) {
		t.Fatalf("the agent's pod-bound token is user %q with %s=%v (authenticated %v), want %s: the policies "+
			"cannot tell agents apart on this release; raise the documented minimum above it",
			tr.Status.User.Username, claim, got, tr.Status.Authenticated, claimNode)
	}
}
