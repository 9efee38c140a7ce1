package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// Migrating from local-ccm: the agent runs with local-ccm's documented DaemonSet arguments (its
// README's two examples) on three host shapes. Each case names the list local-ccm produces and
// the list nodeaddr produces; where they differ, docs/upgrade.md ("Migrating from local-ccm") says
// why and what to pass for local-ccm's result, and the second run proves that recipe.
func TestMigrationFromLocalCCM(t *testing.T) {
	externalOnly := []string{"--external-ip-target=8.8.8.8", "--reconcile-interval=10s", "--v=0"}
	both := []string{"--internal-ip-target=10.0.0.1", "--external-ip-target=8.8.8.8", "--reconcile-interval=10s"}
	for _, tc := range []struct {
		name  string
		setup func(e *env)
		args  []string
		// localCCM is what local-ccm writes (its README); nodeaddr is what nodeaddr writes with the
		// same arguments; asLocalCCM is nodeaddr with the documented migration flags added.
		localCCM, nodeaddr, asLocalCCM string
		recipe                         []string
	}{
		{
			name:  "single public uplink, local-ccm's default arguments",
			setup: func(e *env) { e.uplink("eth0", "203.0.113.10/24", "203.0.113.1", 100) },
			args:  externalOnly,
			// Difference: InternalIP is managed by default; the ExternalIP equal to it is dropped.
			localCCM:   "[Hostname=%s ExternalIP=203.0.113.10]",
			nodeaddr:   "[InternalIP=203.0.113.10 Hostname=%s]",
			recipe:     []string{"--internal-ip-target=none"},
			asLocalCCM: "[ExternalIP=203.0.113.10 Hostname=%s]",
		},
		{
			name: "private NIC and public uplink, both targets",
			setup: func(e *env) {
				e.uplink("eth0", "203.0.113.10/24", "203.0.113.1", 100)
				e.ns.Link("eth1", e.router, "r-eth1")
				e.ns.IP("addr", "add", "10.0.0.5/24", "dev", "eth1")
			},
			args: both,
			// The same addresses; nodeaddr puts a new InternalIP first (the node IP readers take).
			localCCM: "[Hostname=%s InternalIP=10.0.0.5 ExternalIP=203.0.113.10]",
			nodeaddr: "[InternalIP=10.0.0.5 ExternalIP=203.0.113.10 Hostname=%s]",
		},
		{
			name: "dual-stack host, local-ccm's default arguments",
			setup: func(e *env) {
				e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
				e.uplink6("eth0", "2001:db8::10/64", "2001:db8::1", 100)
			},
			args: externalOnly,
			// Difference: an InternalIP per family; the IPv4 ExternalIP equals one and is dropped.
			localCCM:   "[Hostname=%s ExternalIP=192.0.2.10]",
			nodeaddr:   "[InternalIP=192.0.2.10 InternalIP=2001:db8::10 Hostname=%s]",
			recipe:     []string{"--internal-ip-target=none"},
			asLocalCCM: "[ExternalIP=192.0.2.10 Hostname=%s]",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "mig")
			tc.setup(e)
			// Each run manages a Node of its own, registered as a 1.37 kubelet registers it.
			run := func(node string, args []string) string {
				e.cp.CreateNode(t, harness.NodeSpec{Name: node, Taints: []corev1.Taint{harness.Uninitialized},
					Addresses: []corev1.NodeAddress{harness.Addr(hn, e.node)}})
				kc := e.kc // the namespace's relay to the API server exists; only the token differs
				if node != e.node {
					kc = harness.Kubeconfig(t, harness.AgentDir(t), fmt.Sprintf("https://127.0.0.1:%d", e.cp.Port), e.cp.AgentToken(t, node))
				}
				code, _ := harness.RunAgent(t, e.ns, harness.AgentOptions{Kubeconfig: kc,
					Args: append([]string{"--node-name=" + node, "--run-once"}, args...)}, 60*time.Second)
				if code != 0 {
					t.Fatalf("--run-once %v: exit %d", args, code)
				}
				n := e.cp.Node(t, node)
				if harness.HasTaint(n, harness.Uninitialized.Key) {
					t.Errorf("taint still there after %v", args)
				}
				return harness.FormatAddrs(n.Status.Addresses)
			}
			if got, want := run(e.node, tc.args), fill(tc.nodeaddr, e.node); got != want {
				t.Errorf("local-ccm's arguments %v: addresses %s, want %s (local-ccm: %s)", tc.args, got, want, fill(tc.localCCM, e.node))
			}
			if tc.recipe == nil {
				if sameSet(fill(tc.nodeaddr, e.node), fill(tc.localCCM, e.node)) {
					return
				}
				t.Fatalf("%s and local-ccm's %s differ beyond order, and no recipe is documented", tc.nodeaddr, tc.localCCM)
			}
			// The migration recipe gives local-ccm's addresses (order aside).
			got := run(e.node+"-recipe", append(append([]string(nil), tc.args...), tc.recipe...))
			if want := fill(tc.asLocalCCM, e.node); got != want || !sameSet(got, fill(tc.localCCM, e.node)) {
				t.Errorf("with %v: addresses %s, want %s, local-ccm's %s", tc.recipe, got, want, fill(tc.localCCM, e.node))
			}
		})
	}
}

func fill(format, node string) string { return strings.ReplaceAll(format, "%s", node) }

// sameSet compares two "[A B C]" lists regardless of order.
func sameSet(a, b string) bool {
	fa, fb := strings.Fields(strings.Trim(a, "[]")), strings.Fields(strings.Trim(b, "[]"))
	if len(fa) != len(fb) {
		return false
	}
	seen := map[string]int{}
	for _, x := range fa {
		seen[x]++
	}
	for _, x := range fb {
		if seen[x]--; seen[x] < 0 {
			return false
		}
	}
	return true
}

// The bare binary, with no type flag and no cluster, previews an InternalIP per family.
func TestDryRunDefaultsPreviewInternalIP(t *testing.T) {
	harness.RequireE2E(t)
	ns := harness.NewNetns(t, "dry")
	router := harness.NewNetns(t, "rtr")
	harness.DualStackUplink(ns, router)
	code, out := harness.RunAgent(t, ns, harness.AgentOptions{Kubeconfig: "none",
		Args: []string{"--dry-run", "--run-once", "--node-name=dry"}}, 30*time.Second)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got struct {
		Addresses []corev1.NodeAddress `json:"addresses"`
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, `{"addresses"`) {
			if err := json.Unmarshal([]byte(l), &got); err != nil {
				t.Fatal(err)
			}
		}
	}
	if f := harness.FormatAddrs(got.Addresses); f != "[InternalIP=192.0.2.10 InternalIP=2001:db8::10]" {
		t.Fatalf("dry run printed %s, want [InternalIP=192.0.2.10 InternalIP=2001:db8::10] (output %q)", f, out)
	}
}
