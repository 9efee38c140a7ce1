// Package e2e proves nodeaddr on a real kube-apiserver and a real kernel: the real binary runs in a
// network namespace, unprivileged, with a pod-bound ServiceAccount token and the RBAC from deploy/.
package e2e

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }

// env is one test's world (harness.Host) with short names for the tests.
type env struct {
	h      *harness.Host
	t      *testing.T
	cp     *harness.ControlPlane
	node   string
	ns     *harness.Netns
	router *harness.Netns
	kc     string
	// args are agent flags start adds after a scenario's own (the debounce table's --debounce).
	args []string
}

func newEnv(t *testing.T, node string) *env {
	return fromHost(t, harness.NewHost(t, node))
}

// newEnvOn is newEnv on a running control plane with the agent's RBAC (harness.NewHostOn).
func newEnvOn(t *testing.T, cp *harness.ControlPlane, node string) *env {
	return fromHost(t, harness.NewHostOn(t, cp, node))
}

func fromHost(t *testing.T, h *harness.Host) *env {
	return &env{h: h, t: t, cp: h.CP, node: h.Node, ns: h.NS, router: h.Router, kc: h.Kubeconfig}
}

func (e *env) uplink(dev, cidr4, gw4 string, metric int)  { e.h.Uplink(dev, cidr4, gw4, metric) }
func (e *env) uplink6(dev, cidr6, gw6 string, metric int) { e.h.Uplink6(dev, cidr6, gw6, metric) }
func (e *env) start(args ...string) *harness.Agent {
	return e.h.Start(slices.Concat(args, e.args)...)
}

func (e *env) waitAddresses(want []corev1.NodeAddress) *corev1.Node {
	e.t.Helper()
	return e.cp.WaitNode(e.t, e.node, 30*time.Second, "addresses "+format(want), func(n *corev1.Node) bool {
		return slices.Equal(n.Status.Addresses, want)
	})
}

func (e *env) statusWrites() int { return e.cp.Writes(e.t, e.node)["status"] }

func hasTaint(n *corev1.Node, key string) bool {
	return slices.Contains(harness.TaintKeys(n), key)
}

func addr(t corev1.NodeAddressType, a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: t, Address: a}
}

func format(a []corev1.NodeAddress) string {
	s := "["
	for i, x := range a {
		if i > 0 {
			s += " "
		}
		s += string(x.Type) + "=" + x.Address
	}
	return s + "]"
}

func itoa(i int) string { return strconv.Itoa(i) }

// waitEvents waits until exactly n Events with reason exist for node (and fails if more appear).
func waitEvents(t *testing.T, cp *harness.ControlPlane, node, reason string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := len(cp.Events(t, node, reason))
		if got > n {
			t.Fatalf("%s events = %d, want %d", reason, got, n)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s events = %d after 10s, want %d", reason, got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
