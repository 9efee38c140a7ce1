package matrix

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The Nodes of the policy table: the agent's token is bound to a pod on ownNode.
const ownNode, otherNode = "policy-own", "policy-other"

// Who sends a write of the policy table.
const (
	agent = "agent" // the nodeaddr ServiceAccount's token bound to a pod on ownNode
	admin = "admin" // system:masters
)

// policyCase is one line of the policy table: a JSON merge patch sent by one user to one Node,
// whether the shipped admission policies let it through and, for a denial, a part of the message
// ("" for any). Add lines here; every release of the matrix must give the same answers.
type policyCase struct {
	name, as, node, subresource, body string
	allowed                           bool
	why                               string
}

var policyCases = []policyCase{
	{"agent sets its own Node's addresses", agent, ownNode, "status",
		`{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"policy-own"}]}}`, true, ""},
	{"agent writes a nodeaddr.io/ annotation on its own Node", agent, ownNode, "",
		`{"metadata":{"annotations":{"nodeaddr.io/published":"192.0.2.10"}}}`, true, ""},
	{"agent sets another Node's addresses", agent, otherNode, "status",
		`{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`, false, "may not modify Node 'policy-other'"},
	{"agent annotates another Node", agent, otherNode, "",
		`{"metadata":{"annotations":{"nodeaddr.io/published":"x"}}}`, false, ""},
	{"agent labels its own Node", agent, ownNode, "", `{"metadata":{"labels":{"example.com/x":"1"}}}`, false, ""},
	{"agent cordons its own Node", agent, ownNode, "", `{"spec":{"unschedulable":true}}`, false, ""},
	{"agent sets a condition on its own Node", agent, ownNode, "status",
		`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Fake"}]}}`, false, ""},
	{"agent writes a foreign annotation on its own Node", agent, ownNode, "",
		`{"metadata":{"annotations":{"example.com/x":"1"}}}`, false, "may change only annotations under nodeaddr.io/"},
	{"agent rewrites its own Node's Hostname", agent, ownNode, "status",
		`{"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"evil.example"}]}}`, false, ""},
	{"agent publishes something that is no IP address", agent, ownNode, "status",
		`{"status":{"addresses":[{"type":"InternalIP","address":"not-an-ip"},{"type":"Hostname","address":"policy-own"}]}}`, false, ""},
	// The IP check runs string functions (split, substring, lastIndexOf) every release must have.
	{"agent publishes an IPv6 address with an embedded IPv4", agent, ownNode, "status",
		`{"status":{"addresses":[{"type":"ExternalIP","address":"64:ff9b::192.0.2.1"},{"type":"Hostname","address":"policy-own"}]}}`, true, ""},
	{"agent publishes nine IPv6 groups", agent, ownNode, "status",
		`{"status":{"addresses":[{"type":"ExternalIP","address":"1::2:3:4:5:6:7:8"},{"type":"Hostname","address":"policy-own"}]}}`, false, "each an IPv4 or IPv6 address"},
	{"agent publishes an IPv4-mapped loopback address", agent, ownNode, "status",
		`{"status":{"addresses":[{"type":"InternalIP","address":"::ffff:7f00:1"},{"type":"Hostname","address":"policy-own"}]}}`, false, "IPv4-mapped"},
	{"agent publishes a link-local address", agent, ownNode, "status",
		`{"status":{"addresses":[{"type":"InternalIP","address":"169.254.169.254"},{"type":"Hostname","address":"policy-own"}]}}`, false, "link-local"},
	{"agent writes an oversized nodeaddr.io/ annotation", agent, ownNode, "",
		`{"metadata":{"annotations":{"nodeaddr.io/x":"` + strings.Repeat("1", 200) + `"}}}`, false, ""},
	{"admin cordons the agent's Node", admin, ownNode, "", `{"spec":{"unschedulable":true}}`, true, ""},
	{"admin labels the agent's Node", admin, ownNode, "", `{"metadata":{"labels":{"example.com/x":"1"}}}`, true, ""},
}

func (c policyCase) do(ctx context.Context, cs kubernetes.Interface) error {
	var sub []string
	if c.subresource != "" {
		sub = []string{c.subresource}
	}
	// The agent writes as the field manager "nodeaddr", as the binary does (the policy allows it only
	// its own managedFields entry).
	manager := "matrix"
	if c.as == agent {
		manager = "nodeaddr"
	}
	_, err := cs.CoreV1().Nodes().Patch(ctx, c.node, types.MergePatchType, []byte(c.body),
		metav1.PatchOptions{FieldManager: manager}, sub...)
	return err
}

// deniedByPolicy reports whether err is a ValidatingAdmissionPolicy's denial (not RBAC's).
func deniedByPolicy(err error) bool {
	return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '")
}

// checkPolicyTable creates the two Nodes, waits until the policies deny the agent's write to the
// other Node (a new policy takes a moment to reach admission), then sends every line of
// policyCases once.
func checkPolicyTable(t *testing.T, cp *harness.ControlPlane) {
	ctx := context.Background()
	for _, n := range []string{ownNode, otherNode} {
		cp.CreateNode(t, harness.NodeSpec{Name: n, Taints: []corev1.Taint{harness.Uninitialized},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n}}})
	}
	token := cp.AgentToken(t, ownNode)
	checkNodeClaim(t, cp, token)
	clients := map[string]kubernetes.Interface{agent: tokenClient(t, cp, token), admin: cp.Admin}
	probe := policyCases[slices.IndexFunc(policyCases, func(c policyCase) bool {
		return c.as == agent && c.node == otherNode && !c.allowed
	})]
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = probe.do(ctx, clients[agent]); deniedByPolicy(err) {
			break
		}
	}
	if !deniedByPolicy(err) {
		t.Fatalf("the policies never denied %q within 30s (fail open?): last result %v", probe.name, err)
	}
	for _, c := range policyCases {
		err := c.do(ctx, clients[c.as])
		switch {
		case c.allowed && err != nil:
			t.Errorf("%s: denied, want allowed: %v", c.name, err)
		case !c.allowed && !deniedByPolicy(err):
			t.Errorf("%s: got %v, want a denial by a ValidatingAdmissionPolicy", c.name, err)
		case !c.allowed && !strings.Contains(err.Error(), c.why):
			t.Errorf("%s: denial %q does not say %q", c.name, err, c.why)
		}
	}
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
	if got := tr.Status.User.Extra[claim]; !tr.Status.Authenticated || !slices.Equal(got, authnv1.ExtraValue{ownNode}) {
		t.Fatalf("the agent's pod-bound token is user %q with %s=%v (authenticated %v), want %s: the policies "+
			"cannot tell agents apart on this release; raise the documented minimum above it",
			tr.Status.User.Username, claim, got, tr.Status.Authenticated, ownNode)
	}
}

func tokenClient(t *testing.T, cp *harness.ControlPlane, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: cp.Config.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
