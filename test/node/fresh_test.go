package node

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

const uninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// TestRealNode runs the scenarios on one real node, in order: each builds on the state the
// previous one left (the fresh node is installed first).
func TestRealNode(t *testing.T) {
	// Its renumbering window runs beside TestKubeletWithoutCloudProvider's.
	t.Parallel()
	w := newWorld(t, worldOptions{})
	if !t.Run("1-fresh-node-shipped-defaults", w.freshNode) {
		return
	}
	t.Run("2-security-context", w.securityContext)
	t.Run("6-rolling-update", w.rollingUpdate)
	t.Run("5-renumbering", w.renumbering)
	t.Run("8-uninstall", w.uninstall)
}

// freshNode: the kubelet registers the Node with only a Hostname address (no address at all
// before 1.31) and the uninitialized taint; an ordinary Deployment's pod cannot schedule; `kubectl apply -k` of an overlay over the
// shipped base runs the agent through the DaemonSet controller, the scheduler and the real kubelet
// (probes included); the Node gets the defaults' addresses, the taint goes, and only then does the
// Deployment's pod schedule and run.
func (w *world) freshNode(t *testing.T) {
	w.t = t
	cs := w.c.CP.Admin
	ctx := context.Background()
	name := w.node.Name
	n := w.node.Node(w.t)
	if want := registeredAddresses(w.c.Version, name); !reflect.DeepEqual(n.Status.Addresses, want) {
		t.Fatalf("registered Node addresses %v, want %v (kubelet %s without --node-ip)", n.Status.Addresses, want, w.c.Version)
	}
	if !harness.HasTaint(n, uninitialized) {
		t.Fatalf("registered Node taints %v, want %s", harness.TaintKeys(n), uninitialized)
	}

	// The scheduler (1.37) says "untolerated taint(s)" without naming them: make the uninitialized
	// taint the only one (the node-lifecycle controller's not-ready taint goes once the kubelet
	// reports Ready), so the event can only mean it.
	harness.Eventually(w.t, 2*time.Minute, 100*time.Millisecond, "the Node Ready with only the uninitialized taint", func() (bool, string) {
		n := w.node.Node(w.t)
		return nodeReady(n) && reflect.DeepEqual(harness.TaintKeys(n), []string{uninitialized}), fmt.Sprintf("Ready %v, taints %v", nodeReady(n), harness.TaintKeys(n))
	})
	web := webDeployment()
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var blocked string
	harness.Eventually(w.t, 2*time.Minute, 100*time.Millisecond, "FailedScheduling of the web pod", func() (bool, string) {
		blocked = failedScheduling(t, w)
		return blocked != "", "none"
	})
	if taints := harness.TaintKeys(w.node.Node(w.t)); !strings.Contains(blocked, "1 node(s) had untolerated taint") ||
		!reflect.DeepEqual(taints, []string{uninitialized}) {
		t.Errorf("FailedScheduling %q while the Node's taints are %v, want an untolerated taint and only %s",
			blocked, taints, uninitialized)
	}

	applied := time.Now()
	w.kubectlAdmin("apply", "-k", w.overlay())
	harness.Eventually(w.t, 3*time.Minute, 100*time.Millisecond, "the agent pod Ready", func() (bool, string) {
		p := w.agentPod()
		return p != nil && podReady(p), podSeen(p)
	})
	want := expectedAddressesOn(w.c.Version, name)
	w.waitAddresses(want)
	harness.Eventually(w.t, time.Minute, 100*time.Millisecond, "the taint removed", func() (bool, string) {
		taints := harness.TaintKeys(w.node.Node(w.t))
		return !slices.Contains(taints, uninitialized), fmt.Sprintf("taints %v", taints)
	})
	// Read again once the taint is gone: nothing may have changed the addresses since.
	got := w.node.Node(w.t).Status.Addresses
	if !reflect.DeepEqual(got, want) {
		t.Errorf("addresses after the taint was removed %v, want %v", got, want)
	}

	removed := w.taintRemovedAt()
	var webPod *corev1.Pod
	harness.Eventually(w.t, 2*time.Minute, 100*time.Millisecond, "the web pod Running", func() (bool, string) {
		webPod = w.pod("default", "app=web")
		return webPod != nil && webPod.Status.Phase == corev1.PodRunning, podSeen(webPod)
	})
	scheduled := condition(webPod, corev1.PodScheduled)
	if scheduled == nil || scheduled.Status != corev1.ConditionTrue {
		t.Fatalf("web pod has no PodScheduled=True condition: %+v", webPod.Status.Conditions)
	}
	// Conditions carry whole seconds: compare at that precision.
	if scheduled.LastTransitionTime.Time.Before(removed.Truncate(time.Second)) {
		t.Errorf("web pod scheduled at %s, before the taint was removed at %s", scheduled.LastTransitionTime, removed)
	}
	p := w.agentPod()
	if p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("agent restarted %d times", p.Status.ContainerStatuses[0].RestartCount)
	}
	// A hostNetwork pod's IPs come from the Node's addresses when the kubelet first sets its status:
	// recorded, not asserted (the agent started before it had published any).
	if !t.Failed() {
		recordFresh(w.c.Version, name, freshResult{Registered: n.Status.Addresses, Published: got,
			Runtime: runtime(w.node.Node(w.t).Status.NodeInfo.ContainerRuntimeVersion)})
	}
	report(t, "register→taint removed %s (apply→taint removed %s); %s; agent pod IPs %v host IPs %v",
		removed.Sub(w.registeredAt()).Round(time.Millisecond), removed.Sub(applied).Round(time.Millisecond),
		w.breakdown(p, applied, removed), p.Status.PodIPs, p.Status.HostIPs)
}

// runtime names the node's container runtime as its Node reports it ("containerd://2.4.2+unknown":
// built without the release's version stamp) and the runc it runs.
func runtime(reported string) string {
	name, version, _ := strings.Cut(reported, "://")
	version, _, _ = strings.Cut(version, "+")
	return fmt.Sprintf("%s %s, runc %s", name, version, strings.TrimPrefix(harness.RuncVersion, "v"))
}

// waitAddresses waits until the Node's addresses are want and returns them.
func (w *world) waitAddresses(want []corev1.NodeAddress) []corev1.NodeAddress {
	w.t.Helper()
	var got []corev1.NodeAddress
	harness.Eventually(w.t, time.Minute, 100*time.Millisecond, fmt.Sprintf("Node addresses %v", want), func() (bool, string) {
		got = w.node.Node(w.t).Status.Addresses
		return reflect.DeepEqual(got, want), fmt.Sprint(got)
	})
	return got
}

// breakdown says where the time from apply to taint removal went, from the pod's own timestamps
// and the audit log.
func (w *world) breakdown(p *corev1.Pod, applied, removed time.Time) string {
	created := p.CreationTimestamp.Time
	sched := condition(p, corev1.PodScheduled)
	initd := condition(p, corev1.PodReadyToStartContainers)
	var started time.Time
	if r := p.Status.ContainerStatuses[0].State.Running; r != nil {
		started = r.StartedAt.Time
	}
	firstWrite := w.firstAgentWrite()
	part := func(label string, from, to time.Time) string {
		if from.IsZero() || to.IsZero() {
			return label + " ?"
		}
		return label + " " + to.Sub(from).Round(time.Second).String()
	}
	s := []string{part("apply→pod", applied, created)}
	if sched != nil {
		s = append(s, part("pod→scheduled", created, sched.LastTransitionTime.Time))
	}
	if initd != nil {
		s = append(s, part("→sandbox", created, initd.LastTransitionTime.Time))
	}
	s = append(s, part("→container start", created, started), part("start→first write", started, firstWrite),
		part("first write→taint removed", firstWrite, removed))
	return strings.Join(s, ", ")
}

// auditRecord is an audit record as the harness reads it.
type auditRecord = harness.AuditEvent

// audit returns the completed requests user made so far, in order.
func (w *world) audit(user string) []auditRecord {
	w.t.Helper()
	out, err := w.c.CP.Audit(user)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// agentWrites returns the agent's successful writes to the Node, in order.
func (w *world) agentWrites() []auditRecord {
	var out []auditRecord
	for _, r := range w.audit("system:serviceaccount:kube-system:nodeaddr") {
		if r.ObjectRef != nil && r.ObjectRef.Resource == "nodes" && r.ObjectRef.Name == w.node.Name &&
			(r.Verb == "patch" || r.Verb == "update") && r.ResponseStatus != nil && r.ResponseStatus.Code == 200 {
			out = append(out, r)
		}
	}
	return out
}

// registeredAt is when the kubelet's create of its Node completed.
func (w *world) registeredAt() time.Time {
	w.t.Helper()
	for _, r := range w.audit("system:node:" + w.node.Name) {
		if r.Verb == "create" && r.ObjectRef != nil && r.ObjectRef.Resource == "nodes" && r.ResponseStatus != nil && r.ResponseStatus.Code == 201 {
			return r.Timestamp
		}
	}
	w.t.Fatal("no Node create by the kubelet in the audit log")
	return time.Time{}
}

func (w *world) firstAgentWrite() time.Time {
	if ws := w.agentWrites(); len(ws) > 0 {
		return ws[0].Timestamp
	}
	return time.Time{}
}

// taintRemovedAt is when the agent's write of the Node's spec (the taint removal) completed.
func (w *world) taintRemovedAt() time.Time {
	w.t.Helper()
	for _, r := range w.agentWrites() {
		if r.ObjectRef.Subresource == "" {
			return r.Timestamp
		}
	}
	w.t.Fatal("no write of the Node's spec by the agent in the audit log")
	return time.Time{}
}

func webDeployment() *appsv1.Deployment {
	return deployment("web", harness.PauseImage, nil)
}

// deployment is a one-replica Deployment in default, labelled app=name, of one container "web"
// running image (never pulled: the test loaded it into the node); pod adjusts the pod spec.
func deployment(name, image string, pod func(*corev1.PodSpec)) *appsv1.Deployment {
	one := int32(1)
	labels := map[string]string{"app": name}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image, ImagePullPolicy: corev1.PullNever}}}
	if pod != nil {
		pod(&spec)
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// failedScheduling returns the message of a FailedScheduling event about the web pod, or "".
func failedScheduling(t *testing.T, w *world) string {
	evs, err := w.c.CP.Admin.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return ""
	}
	for _, e := range evs.Items {
		if e.Reason == "FailedScheduling" && strings.HasPrefix(e.InvolvedObject.Name, "web-") {
			return e.Message
		}
	}
	return ""
}

func (w *world) pod(ns, selector string) *corev1.Pod {
	pods, err := w.c.CP.Admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(pods.Items) == 0 {
		return nil
	}
	return &pods.Items[0]
}

// podSeen says what a wait on a pod saw of it.
func podSeen(p *corev1.Pod) string {
	if p == nil {
		return "no pod"
	}
	return fmt.Sprintf("pod %s %s ready %v podIPs %v", p.Name, p.Status.Phase, podReady(p), p.Status.PodIPs)
}

func condition(p *corev1.Pod, c corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == c {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	c := condition(p, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}
