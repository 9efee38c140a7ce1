package e2e

import (
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// --annotations on the real API server: the keys are set with the addresses, in the same write
// through nodes/status (which keeps metadata changes), and before the taint goes; another annotation
// is untouched, the `test` of an absent key is accepted, a renumbering is one write, and a key whose
// address is gone is removed.
func TestAnnotationsPublished(t *testing.T) {
	e := newEnv(t, "annotated")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized},
		Annotations: map[string]string{"example.com/keep": "me"}})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	e.start("--internal-ip-target=none", "--external-ip-target=192.0.2.1", "--annotations=nodeaddr,k3s,example.com/cidr=external-ipv4-cidr")

	n := e.cp.WaitNode(t, e.node, 30*time.Second, "uninitialized taint removed", func(n *corev1.Node) bool {
		return !harness.HasTaint(n, harness.Uninitialized.Key)
	})
	want := map[string]string{"example.com/keep": "me", "nodeaddr.io/external-ipv4": "192.0.2.10",
		"k3s.io/external-ip": "192.0.2.10", "example.com/cidr": "192.0.2.10/24"}
	if !maps.Equal(n.Annotations, want) {
		t.Fatalf("annotations = %v, want %v", n.Annotations, want)
	}
	if w := e.cp.Writes(t, e.node); w["status"] != 1 || w[""] != 1 {
		t.Fatalf("writes = %v, want 1 status write (addresses and annotations) and 1 node write (the taint)", w)
	}

	// Renumbering (make-before-break): one more status write.
	e.ns.IP("addr", "add", "192.0.2.11/25", "dev", "eth0")
	e.ns.IP("addr", "del", "192.0.2.10/24", "dev", "eth0")
	e.ns.IP("route", "replace", "default", "via", "192.0.2.1", "dev", "eth0", "metric", "100")
	want = map[string]string{"example.com/keep": "me", "nodeaddr.io/external-ipv4": "192.0.2.11",
		"k3s.io/external-ip": "192.0.2.11", "example.com/cidr": "192.0.2.11/25"}
	n = e.cp.WaitNode(t, e.node, 30*time.Second, "annotations follow the renumbering", func(n *corev1.Node) bool {
		return maps.Equal(n.Annotations, want)
	})
	if got := harness.FormatAddrs(n.Status.Addresses); got != "[ExternalIP=192.0.2.11]" {
		t.Fatalf("addresses = %s, want [ExternalIP=192.0.2.11]", got)
	}
	time.Sleep(2 * time.Second) // measured window: a wrong agent would write again by now
	if w := e.cp.Writes(t, e.node); w["status"] != 2 || w[""] != 1 {
		t.Fatalf("writes = %v, want 2 status writes and 1 node write", w)
	}
}
