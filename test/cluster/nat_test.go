package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// natAddress is what VirtualBox's NAT gives every VM on its default-route interface.
const natAddress = "10.0.2.15"

// TestTwoNodesBehindNAT is two Vagrant-shaped nodes: each has VirtualBox's NAT interface (nat0,
// 10.0.2.15, the default route through 10.0.2.2) and the host-only LAN where the control plane
// lives (eth0, leased by DHCP without a router: 192.0.2.11 and .12). With the old default (the
// route toward 8.8.8.8 for both types, any scope: two flags away) both Nodes publish 10.0.2.15:
// the conflict detector marks both with NodeAddressConflict naming the other, a Warning Event
// each, and the approver leaves their serving CSRs pending. With the plain new default (the
// InternalIP from the route toward the API server; the ExternalIP only when globally routable,
// which the NAT's 10.0.2.15 is not) each Node lists its LAN address and no ExternalIP, the
// conflict clears on both, and the approver approves both kubelets' serving CSRs: kubectl logs
// works on both nodes.
func TestTwoNodesBehindNAT(t *testing.T) {
	c := harness.StartNodeClusterWith(t, nodeA, harness.KubernetesVersion,
		harness.ClusterOptions{Hardened: true, Nodes: []string{nodeB}})
	w := &cluster{t: t, c: c, lan: harness.NewLAN(t), nodes: map[string]*node{}, kubectl: harness.MustBuild(t).Kubectl}
	w.lan.NoRouter = true
	w.admin = c.AdminKubeconfig(t)
	agent := w.agentImage()
	for _, n := range []struct{ name, ip string }{{nodeA, ipA}, {nodeB, ipB}} {
		ns := harness.NewNetns(t, n.name)
		w.lan.Join(ns, n.ip)
		nat := harness.NewNetns(t, "nat")
		ns.Link("nat0", nat, "r-nat0")
		ns.IP("addr", "add", natAddress+"/24", "dev", "nat0")
		ns.IP("route", "add", "default", "via", "10.0.2.2", "dev", "nat0")
		nat.IP("addr", "add", "10.0.2.2/24", "dev", "r-nat0")
		ns.Sysctl("net.ipv4.ip_forward", "1")
		rn := c.StartNode(ns, harness.NodeOptions{Name: n.name, Images: []string{agent}})
		rn.RecordNetns(w.lan.Router.Name, nat.Name)
		w.nodes[n.name] = &node{RealNode: rn}
	}
	c.ReachKubeletsFrom(w.lan.Router)
	w.lan.Router.RelayAt(fmt.Sprintf("%s1:%d", harness.LANPrefix, c.CP.Port), fmt.Sprintf("127.0.0.1:%d", c.CP.Port))
	c.PublishAPIServer(harness.LANPrefix + "1")
	for _, n := range w.nodes {
		n.proxy = n.StartKubeProxy("--masquerade-all")
	}
	window := `  - target: {kind: Deployment, name: nodeaddr-conflicts}
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --move-window=5s
`
	components := []string{"kubelet-serving-csr", "address-conflicts"}
	oldDefault := []string{"--internal-ip-target=8.8.8.8,2001:4860:4860::8888", "--external-ip-scope=any"}
	// The detector comes once both Nodes list the NAT address: both claims predate it, so both
	// Nodes are marked (were one agent slower by more than the window, only its Node would be:
	// docs/conflicts.md, "Who is marked").
	w.kubectlAdmin("apply", "-k", w.overlayWith(components[:1], oldDefault, ""))
	for _, name := range []string{nodeA, nodeB} {
		c.CP.WaitNode(t, name, 3*time.Minute, "InternalIP "+natAddress, func(n *corev1.Node) bool {
			return slices.Contains(n.Status.Addresses, harness.Addr(corev1.NodeInternalIP, natAddress))
		})
	}
	w.kubectlAdmin("apply", "-k", w.overlayWith(components, oldDefault, window))
	t.Run("old-default-both-on-the-nat-address", func(t *testing.T) {
		w.diagnose(t)
		for name, other := range map[string]string{nodeA: nodeB, nodeB: nodeA} {
			n := c.CP.WaitNode(t, name, 3*time.Minute, "NodeAddressConflict True naming "+other, func(n *corev1.Node) bool {
				cond := conflictCondition(n)
				return cond != nil && cond.Status == corev1.ConditionTrue && strings.Contains(cond.Message, other)
			})
			if want := []corev1.NodeAddress{harness.Addr(corev1.NodeInternalIP, natAddress), harness.Addr(corev1.NodeHostName, name)}; !slices.Equal(n.Status.Addresses, want) {
				t.Errorf("Node %s: addresses %s, want %s", name, harness.FormatAddrs(n.Status.Addresses), harness.FormatAddrs(want))
			}
			harness.Eventually(t, time.Minute, 200*time.Millisecond, "a Warning Event about "+name+" naming "+other, func() (bool, string) {
				ev := c.CP.Events(t, name, vocab.ReasonAddressConflict)
				return len(ev) > 0 && ev[0].Type == corev1.EventTypeWarning && strings.Contains(ev[0].Message, other), fmt.Sprint(ev)
			})
		}
		if n := len(w.approvedCSRs(t)); n != 0 {
			t.Errorf("%d serving CSRs approved while both Nodes claim %s: want none", n, natAddress)
		}
	})
	w.kubectlAdmin("apply", "-k", w.overlayWith(components, nil, window)) // the plain default: no agent flag
	t.Run("new-default-each-on-its-lan-address", func(t *testing.T) {
		w.diagnose(t)
		for name, ip := range map[string]string{nodeA: ipA, nodeB: ipB} {
			c.CP.WaitNode(t, name, 3*time.Minute, "its LAN address only and NodeAddressConflict False", func(n *corev1.Node) bool {
				cond := conflictCondition(n)
				return slices.Equal(n.Status.Addresses, []corev1.NodeAddress{harness.Addr(corev1.NodeInternalIP, ip), harness.Addr(corev1.NodeHostName, name)}) &&
					cond != nil && cond.Status == corev1.ConditionFalse
			})
		}
		// Still needed with the new default, because of the old default's phase: the kubelets wait
		// on the CSRs they filed for 10.0.2.15 then, which the approver left pending (an address
		// of another Node) and will not approve now (no longer theirs); a kubelet files a new one
		// only when its wait ends (15 minutes). The runbook's step: delete them, and each kubelet
		// files one for its Node's addresses at once. A cluster installed on the new default
		// never files them.
		if pending := w.pendingCSRs(t); len(pending) != 2 {
			t.Errorf("pending serving CSRs %v, want one per node (filed for %s)", pending, natAddress)
		}
		w.kubectlAdmin("delete", "csr", "--all")
		harness.Eventually(t, 3*time.Minute, 200*time.Millisecond, "a serving CSR of each node approved, kubectl logs working on both", func() (bool, string) {
			// On a busy machine a kubelet may file again from its Node as it last saw it (still
			// 10.0.2.15): the approver leaves that pending too, and the runbook's step is repeated.
			w.deleteStalePendingCSRs(t, 30*time.Second)
			approved := w.approvedCSRs(t)
			for _, name := range []string{nodeA, nodeB} {
				if !slices.Contains(approved, "system:node:"+name) {
					return false, fmt.Sprintf("approved CSRs of %v", approved)
				}
				p := w.podOn("kube-system", "app.kubernetes.io/name=nodeaddr", name)
				if p == nil {
					return false, "no agent pod on " + name
				}
				if out, err := w.tryKubectl("logs", "-n", "kube-system", "--tail=1", p.Name); err != nil {
					return false, fmt.Sprintf("logs of %s: %v: %s", p.Name, err, out)
				}
			}
			return true, ""
		})
	})
}

// conflictCondition is n's NodeAddressConflict condition, or nil.
func conflictCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == vocab.ConditionAddressConflict {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// approvedCSRs are the requesters of the approved kubelet-serving CSRs.
func (w *cluster) approvedCSRs(t *testing.T) []string {
	t.Helper()
	return w.csrs(t, true)
}

// pendingCSRs are the requesters of the kubelet-serving CSRs neither approved nor denied.
func (w *cluster) pendingCSRs(t *testing.T) []string {
	t.Helper()
	return w.csrs(t, false)
}

// deleteStalePendingCSRs deletes the kubelet-serving CSRs left undecided for longer than age (the
// runbook's step for a CSR filed for an address its Node no longer has), saying which.
func (w *cluster) deleteStalePendingCSRs(t *testing.T, age time.Duration) {
	t.Helper()
	csrs := w.c.CP.Admin.CertificatesV1().CertificateSigningRequests()
	list, err := csrs.List(context.Background(), metav1.ListOptions{FieldSelector: "spec.signerName=" + certv1.KubeletServingSignerName})
	if err != nil {
		t.Fatal(err)
	}
	for _, csr := range list.Items {
		if len(csr.Status.Conditions) == 0 && time.Since(csr.CreationTimestamp.Time) > age {
			t.Logf("CSR %s of %s pending for %s: deleted (the runbook's step)", csr.Name, csr.Spec.Username, time.Since(csr.CreationTimestamp.Time).Round(time.Second))
			if err := csrs.Delete(context.Background(), csr.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
}

// csrs are the requesters of the kubelet-serving CSRs approved (or, with !approved, undecided).
func (w *cluster) csrs(t *testing.T, approved bool) []string {
	t.Helper()
	list, err := w.c.CP.Admin.CertificatesV1().CertificateSigningRequests().List(context.Background(),
		metav1.ListOptions{FieldSelector: "spec.signerName=" + certv1.KubeletServingSignerName})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, csr := range list.Items {
		if (len(csr.Status.Conditions) > 0 && csr.Status.Conditions[0].Type == certv1.CertificateApproved) == approved &&
			(approved || len(csr.Status.Conditions) == 0) {
			out = append(out, csr.Spec.Username)
		}
	}
	return out
}

// agentImage writes the nodeaddr image alone (the NAT scenario runs no flannel and no e2e).
func (w *cluster) agentImage() string {
	t := w.t
	t.Helper()
	imageBinOnce.Do(func() {
		if imageBinDir, imageBinErr = os.MkdirTemp("", "nodeaddr-image"); imageBinErr == nil {
			imageBin = filepath.Join(imageBinDir, "nodeaddr")
			imageBinErr = harness.BuildImageBinary(os.Stderr, agentTag, imageBin)
		}
	})
	if imageBinErr != nil {
		t.Fatal(imageBinErr)
	}
	tar := filepath.Join(w.c.CP.Dir, "nodeaddr-image.tar")
	if err := harness.WriteImage(tar, w.baseImage()+":"+agentTag, imageBin, harness.ImageBinary, harness.ImageUser, harness.ImageEntrypoint); err != nil {
		t.Fatal(err)
	}
	return tar
}
