package remediation

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

const grace = "--grace=6s"

// TestRemediation: a renumbered Node's stale hostNetwork pods are evicted, one at a time on that
// Node, after the grace; a PodDisruptionBudget, a static pod, an opt-out and a pod no controller
// owns are reported on the Node and never evicted; a flap within the grace evicts nothing; a Node
// that claims another's address gets only its own pods recreated.
func TestRemediation(t *testing.T) {
	w := newWorld(t)
	w.node(t, "node-a", "10.0.0.2")
	w.node(t, "node-b", "10.0.1.2")
	for _, name := range []string{"ds-a", "rs-a", "guarded"} {
		w.pod(t, "node-a", name, "10.0.0.2")
	}
	w.pdb(t, "guarded")
	w.pod(t, "node-a", "static-a", "10.0.0.2", func(p *corev1.Pod) {
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "0b1a6b7e-0000-4000-8000-000000000002", Controller: new(true)}}
	})
	w.pod(t, "node-a", "optout", "10.0.0.2", func(p *corev1.Pod) {
		p.Annotations = map[string]string{"nodeaddr.io/remediation": "disabled"}
	})
	w.pod(t, "node-a", "orphan", "10.0.0.2", func(p *corev1.Pod) { p.OwnerReferences = nil })
	w.pod(t, "node-b", "ds-b", "10.0.1.2")
	r := harness.StartClusterSide(t, w.cp, "remediator", "nodeaddr-remediator", grace,
		"--max-evictions-per-node=1", "--max-evictions=10")

	// A flap on node-b (away and back at once) evicts nothing: ds-b is current again before its
	// grace ends, and node-a's evictions below happen after node-b's grace has passed.
	w.renumber(t, "node-b", "10.0.1.9")
	w.renumber(t, "node-b", "10.0.1.2")

	// node-a renumbered (to two addresses, as a host on two networks); evictions wait for their
	// pod to be gone (one per Node at a time).
	w.setCompleting(t, false)
	w.renumber(t, "node-a", "10.0.0.3", "10.0.2.3")
	var first []string
	wait(t, "one of ds-a, rs-a evicted", func() (bool, string) {
		first = w.terminating(t, "ds-a", "rs-a")
		return len(first) > 0, fmt.Sprint(first)
	})
	if len(first) != 1 || metric(t, r, "nodeaddr_remediation_evictions_total", `result="evicted"`) != 1 {
		t.Fatalf("evicted %v with one slot on node-a, want exactly one", first)
	}
	w.setCompleting(t, true)
	wait(t, "ds-a and rs-a evicted and gone", func() (bool, string) {
		d := w.deletedPods()
		return slices.Equal(d, []string{"ds-a", "rs-a"}), fmt.Sprint(d)
	})
	want := []string{
		"Normal StalePodEvicted ds-a", "Normal StalePodEvicted rs-a",
		"Warning StalePodEvictionBlocked guarded",
		"Warning StalePodNotEvicted optout", "Warning StalePodNotEvicted orphan", "Warning StalePodNotEvicted static-a",
	}
	wait(t, "node-a's Events", func() (bool, string) {
		got := w.events(t, "node-a")
		return slices.Equal(got, want), fmt.Sprint(got)
	})
	if got := w.terminating(t, "guarded", "static-a", "optout", "orphan", "ds-b"); len(got) > 0 {
		t.Errorf("evicted %v: a PDB, a static pod, an opt-out, no controller and a flap must keep them", got)
	}
	if got := w.events(t, "node-b"); len(got) > 0 {
		t.Errorf("node-b's flap within the grace reported %v", got)
	}
	if b := metric(t, r, "nodeaddr_remediation_evictions_total", `result="blocked"`); b < 1 {
		t.Errorf("evictions_total{blocked} = %v, want ≥ 1", b)
	}
	for reason, n := range map[string]float64{"PDBBlocked": 1, "StaticPod": 1, "OptedOut": 1, "NoController": 1, "Grace": 0, "Evict": 0} {
		if got := metric(t, r, "nodeaddr_remediation_stale_pods", `reason="`+reason+`"`); got != n {
			t.Errorf("stale_pods{reason=%s} = %v, want %v", reason, got, n)
		}
	}

	// node-b, compromised, claims node-a's current address 10.0.0.3: its own pod ds-b becomes
	// stale and is recreated. ds-a's new pod on node-a at 10.0.0.3 (a DaemonSet's, not opted out,
	// no budget: evictable) comes while node-b lists that address, so the remediator decides on it
	// then: node-a's pods are compared with node-a's addresses only, and it stays. A verdict that
	// compared with any Node's addresses (an address another Node lists taken as no longer
	// node-a's, or "another Node has the pod's IP") would evict it.
	w.renumber(t, "node-b", "10.0.0.3")
	w.pod(t, "node-a", "ds-a-new", "10.0.0.3")
	wait(t, "ds-b evicted", func() (bool, string) {
		d := w.deletedPods()
		return slices.Equal(d, []string{"ds-a", "ds-b", "rs-a"}), fmt.Sprint(d)
	})
	if got := w.terminating(t, "ds-a-new", "guarded", "static-a", "optout", "orphan"); len(got) > 0 {
		t.Errorf("node-b's claim evicted node-a's %v", got)
	}
	if got := metric(t, r, "nodeaddr_remediation_evictions_total", `result="evicted"`); got != 3 {
		t.Errorf("evictions_total{evicted} = %v, want 3", got)
	}
	checkRemediationGolden(t, r)
	if strings.Contains(r.Logs(), "level=ERROR") {
		t.Errorf("the remediator logged errors:\n%s", r.Logs())
	}
}

// TestRemediatorRights: what the remediator's own token can and cannot do (docs/remediation.md).
func TestRemediatorRights(t *testing.T) {
	w := newWorld(t)
	w.node(t, "node-a", "10.0.0.2")
	w.setCompleting(t, false)
	for _, name := range []string{"p1", "p2"} {
		w.pod(t, "node-a", name, "10.0.0.2")
	}
	c := w.remediatorClient(t)
	pod, err := w.cp.Admin.CoreV1().Pods(ns).Get(w.ctx, "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evict := func(opts *metav1.DeleteOptions, dry bool) error {
		e := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: ns}, DeleteOptions: opts}
		if dry {
			if e.DeleteOptions == nil {
				e.DeleteOptions = &metav1.DeleteOptions{}
			}
			e.DeleteOptions.DryRun = []string{metav1.DryRunAll}
		}
		return c.CoreV1().Pods(ns).EvictV1(w.ctx, e)
	}
	uid := &metav1.Preconditions{UID: &pod.UID}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"eviction without a UID precondition", evict(nil, false)},
		{"eviction with gracePeriodSeconds 0", evict(&metav1.DeleteOptions{Preconditions: uid, GracePeriodSeconds: new(int64(0))}, false)},
		{"eviction with a propagation policy", evict(&metav1.DeleteOptions{Preconditions: uid, PropagationPolicy: new(metav1.DeletePropagationOrphan)}, false)},
		{"eviction as a dry run", evict(&metav1.DeleteOptions{Preconditions: uid}, true)},
		{"eviction with a resourceVersion precondition", evict(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion}}, false)},
		{"Event about a Pod", createEvent(w, c, "default", corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p1"}, "StalePodEvicted")},
		{"Event with another reason", createEvent(w, c, "default", corev1.ObjectReference{Kind: "Node", Name: "node-a"}, "NodeNotReady")},
		{"another Lease", createLease(w, c, "kube-scheduler")},
	} {
		if !apierrors.IsForbidden(tc.err) || !strings.Contains(tc.err.Error(), "ValidatingAdmissionPolicy") {
			t.Errorf("%s: %v, want 403 from the component's policy", tc.name, tc.err)
		}
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"delete a pod", c.CoreV1().Pods(ns).Delete(w.ctx, "p2", metav1.DeleteOptions{})},
		{"Event in the pods' namespace", createEvent(w, c, ns, corev1.ObjectReference{Kind: "Node", Name: "node-a"}, "StalePodEvicted")},
		{"patch a Node", func() error {
			_, err := c.CoreV1().Nodes().Patch(w.ctx, "node-a", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
			return err
		}()},
	} {
		if !apierrors.IsForbidden(tc.err) || strings.Contains(tc.err.Error(), "ValidatingAdmissionPolicy") {
			t.Errorf("%s: %v, want 403 from RBAC", tc.name, tc.err)
		}
	}
	if got := w.terminating(t, "p1", "p2"); len(got) > 0 {
		t.Fatalf("refused requests evicted %v", got)
	}
	// What it may: its own Event about a Node, and the eviction of the shape it posts, of any pod
	// (the residue: admission never sees the pod).
	if err := createEvent(w, c, "default", corev1.ObjectReference{Kind: "Node", Name: "node-a"}, "StalePodEvicted"); err != nil {
		t.Errorf("its own Event: %v", err)
	}
	if err := createLease(w, c, "nodeaddr-remediator"); err != nil {
		t.Errorf("its own Lease: %v", err)
	}
	if err := evict(&metav1.DeleteOptions{Preconditions: uid}, false); err != nil {
		t.Errorf("eviction of its shape: %v", err)
	}
	if got := w.terminating(t, "p1", "p2"); !slices.Equal(got, []string{"p1"}) {
		t.Errorf("terminating %v, want [p1]", got)
	}
}

func createEvent(w *world, c kubernetes.Interface, namespace string, ref corev1.ObjectReference, reason string) error {
	_, err := c.CoreV1().Events(namespace).Create(w.ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "remediator-"},
		InvolvedObject: ref, Reason: reason, Message: "m", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "nodeaddr-remediator"},
	}, metav1.CreateOptions{})
	return err
}

func createLease(w *world, c kubernetes.Interface, name string) error {
	holder := "x"
	_, err := c.CoordinationV1().Leases("kube-system").Create(w.ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
	return err
}
