package remediation

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

const ns = "apps"

// world is the control plane with the base RBAC, the component's RBAC and policies, and a
// kubelet stand-in that completes the deletions of evicted pods while it is on.
type world struct {
	cp  *harness.ControlPlane
	ctx context.Context

	mu       sync.Mutex
	complete bool     // finish terminating pods' deletions (as their kubelet would)
	deleted  []string // pods whose deletion the stand-in completed
}

func newWorld(t *testing.T) *world {
	harness.RequireE2E(t)
	cp := harness.StartControlPlane(t)
	ctx := t.Context()
	cp.ApplyRBAC(t)
	component := filepath.Join(harness.RepoDir(), "deploy", "components", "pod-remediation")
	for _, f := range []string{"rbac.yaml", "policy.yaml"} {
		if err := cp.ApplyManifest(ctx, filepath.Join(component, f)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No kube-controller-manager: the ServiceAccount admission plugin needs the namespace's default.
	if _, err := cp.Admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &world{cp: cp, ctx: ctx, complete: true}
	w.waitPolicies(t)
	wi, err := cp.Admin.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wi.Stop)
	go w.kubelet(ctx, wi)
	return w
}

// kubelet completes the deletion of every terminating pod while w.complete is on.
func (w *world) kubelet(ctx context.Context, wi watch.Interface) {
	for ev := range wi.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted && p.DeletionTimestamp != nil {
			w.finish(ctx, p)
		}
	}
}

func (w *world) finish(ctx context.Context, p *corev1.Pod) {
	w.mu.Lock()
	on := w.complete
	w.mu.Unlock()
	if !on {
		return
	}
	if err := w.cp.Admin.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64(0)), Preconditions: &metav1.Preconditions{UID: &p.UID}}); err == nil {
		// The watch and setCompleting may both finish one pod: recorded once.
		w.mu.Lock()
		if !slices.Contains(w.deleted, p.Name) {
			w.deleted = append(w.deleted, p.Name)
		}
		w.mu.Unlock()
	}
}

// setCompleting turns the stand-in on or off; on, it finishes the pods already terminating.
func (w *world) setCompleting(t *testing.T, on bool) {
	w.mu.Lock()
	w.complete = on
	w.mu.Unlock()
	if !on {
		return
	}
	pods, err := w.cp.Admin.CoreV1().Pods(ns).List(w.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp != nil {
			w.finish(w.ctx, &pods.Items[i])
		}
	}
}

func (w *world) deletedPods() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := slices.Clone(w.deleted)
	sort.Strings(out)
	return out
}

// node creates a Node with one InternalIP.
func (w *world) node(t *testing.T, name, ip string) {
	w.cp.CreateNode(t, harness.NodeSpec{Name: name, Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}}})
}

// renumber replaces a Node's InternalIPs with ips (as its agent would).
func (w *world) renumber(t *testing.T, name string, ips ...string) {
	t.Helper()
	n, err := w.cp.Admin.CoreV1().Nodes().Get(w.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = nil
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	if _, err := w.cp.Admin.CoreV1().Nodes().UpdateStatus(w.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pod creates a running hostNetwork pod on node with the Node's address as its IP (as the
// kubelet does), owned by a DaemonSet unless edit says otherwise.
func (w *world) pod(t *testing.T, node, name, ip string, edit ...func(*corev1.Pod)) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: name, UID: "0b1a6b7e-0000-4000-8000-000000000001", Controller: new(true)}}},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}},
	}
	for _, e := range edit {
		e(p)
	}
	p, err := w.cp.Admin.CoreV1().Pods(ns).Create(w.ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Ready: an unready pod may be evicted despite a PodDisruptionBudget (unhealthyPodEvictionPolicy).
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		HostIP: ip, HostIPs: []corev1.HostIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := w.cp.Admin.CoreV1().Pods(ns).UpdateStatus(w.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pdb guards app=name with maxUnavailable 0, its status written as the disruption controller
// would (no disruption allowed).
func (w *world) pdb(t *testing.T, name string) {
	t.Helper()
	zero := intstr.FromInt32(0)
	b, err := w.cp.Admin.PolicyV1().PodDisruptionBudgets(ns).Create(w.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: b.Generation, DisruptionsAllowed: 0,
		CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	if _, err := w.cp.Admin.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(w.ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// terminating lists the pods being deleted or gone, of those named.
func (w *world) terminating(t *testing.T, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		p, err := w.cp.Admin.CoreV1().Pods(ns).Get(w.ctx, n, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			out = append(out, n)
		}
	}
	return out
}

// events lists the remediator's Events about node as "type reason pod".
func (w *world) events(t *testing.T, node string) []string {
	t.Helper()
	evs, err := w.cp.Admin.CoreV1().Events("default").List(w.ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",source=nodeaddr-remediator"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		pod := ""
		for _, f := range strings.Fields(e.Message) {
			if strings.HasPrefix(f, ns+"/") {
				pod = strings.TrimRight(strings.TrimPrefix(f, ns+"/"), ":")
				break
			}
		}
		out = append(out, fmt.Sprintf("%s %s %s", e.Type, e.Reason, pod))
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// remediatorClient is a client with the remediator's own token.
func (w *world) remediatorClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(&rest.Config{Host: w.cp.Config.Host, BearerToken: w.cp.ServiceAccountToken(t, "nodeaddr-remediator"),
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// metric sums the samples of a family whose labels contain sel (e.g. `result="evicted"`).
func metric(t *testing.T, r *harness.Approver, family, sel string) float64 {
	t.Helper()
	m, err := r.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for k, v := range m {
		if (k == family || strings.HasPrefix(k, family+"{")) && strings.Contains(k, sel) {
			sum += v
		}
	}
	return sum
}

func wait(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	harness.Eventually(t, 60*time.Second, 100*time.Millisecond, what, cond)
}

// waitPolicies waits until the component's three policies are in effect (a new policy takes a
// moment to load): the remediator's token is refused a dry-run eviction of a pod on the pod
// network (which nothing else reads), another Lease, and an Event with another reason.
func (w *world) waitPolicies(t *testing.T) {
	t.Helper()
	probe, err := w.cp.Admin.CoreV1().Pods(ns).Create(w.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := w.remediatorClient(t)
	harness.Eventually(t, 30*time.Second, 100*time.Millisecond, "the pod-remediation policies in effect", func() (bool, string) {
		errs := []error{
			c.CoreV1().Pods(ns).EvictV1(w.ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
				DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &probe.UID}, DryRun: []string{metav1.DryRunAll}}}),
			createLease(w, c, "kube-scheduler"),
			createEvent(w, c, "default", corev1.ObjectReference{Kind: "Node", Name: "probe"}, "NodeNotReady"),
		}
		for _, err := range errs {
			if !apierrors.IsForbidden(err) {
				return false, fmt.Sprint(errs)
			}
		}
		return true, ""
	})
}
