// Package e2e proves nodeaddr on a real kube-apiserver and a real kernel: the real binary runs in a
// network namespace, unprivileged, with a pod-bound ServiceAccount token and the RBAC from deploy/.
package e2e

import (
	"os"
	"slices"
	"strconv"
	"strings"
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
	return e.cp.WaitNode(e.t, e.node, 30*time.Second, "addresses "+harness.FormatAddrs(want), func(n *corev1.Node) bool {
		return slices.Equal(n.Status.Addresses, want)
	})
}

func (e *env) statusWrites() int { return e.cp.Writes(e.t, e.node)["status"] }

func itoa(i int) string { return strconv.Itoa(i) }

// lastLine is s's last non-empty line: what a wait on a log saw last.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}
