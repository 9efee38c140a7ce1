package remediation

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// TestRemediationRenumberedPodIPs: the kubelet gave flannel's pod the Node's new address as podIPs
// (generateAPIPodStatus: "HostNetwork Pods inherit the node IPs as PodIPs"), but its container
// started before the renumbering the remediator saw: it is evicted, the Event naming the container.
// The first addresses another Node publishes recreate nothing (its agent's pod started before
// them), though that Node's grace ends first.
func TestRemediationRenumberedPodIPs(t *testing.T) {
	w := newWorld(t)
	w.cp.CreateNode(t, harness.NodeSpec{Name: "node-b", Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-b"}}})
	w.node(t, "node-a", "10.0.0.2")
	hourAgo := time.Now().Add(-time.Hour)
	w.pod(t, "node-a", "flannel-a", "10.0.0.2")
	w.started(t, "flannel-a", "10.0.0.2", hourAgo)
	w.pod(t, "node-b", "agent-b", "10.0.1.2")
	w.started(t, "agent-b", "10.0.1.2", hourAgo)
	r := harness.StartClusterSide(t, w.cp, "remediator", "nodeaddr-remediator", grace)

	w.renumber(t, "node-b", "10.0.1.2") // the first addresses published
	w.renumber(t, "node-a", "10.0.0.3")
	w.started(t, "flannel-a", "10.0.0.3", hourAgo) // the kubelet's new podIPs, the same container
	wait(t, "flannel-a evicted and gone", func() (bool, string) {
		d := w.deletedPods()
		return slices.Equal(d, []string{"flannel-a"}), fmt.Sprint(d)
	})
	if got := w.terminating(t, "agent-b"); len(got) > 0 {
		t.Errorf("the first addresses published evicted %v", got)
	}
	if got := w.events(t, "node-b"); len(got) > 0 {
		t.Errorf("node-b's first addresses reported %v", got)
	}
	evs, err := w.cp.Admin.CoreV1().Events("default").List(w.ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=node-a,source=nodeaddr-remediator"})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Evicted pod %s/flannel-a: its container c started at %s, when the Node had [10.0.0.2], which it no longer has",
		ns, hourAgo.UTC().Format(time.RFC3339))
	if len(evs.Items) != 1 || evs.Items[0].Reason != "StalePodEvicted" || !strings.HasPrefix(evs.Items[0].Message, want) {
		t.Errorf("node-a's Events %+v, want one StalePodEvicted %q", evs.Items, want)
	}
	if got := metric(t, r, "nodeaddr_remediation_evictions_total", `result="evicted"`); got != 1 {
		t.Errorf("evictions_total{evicted} = %v, want 1", got)
	}
}

// started writes name's status as its kubelet would: running, podIPs ip, its container c running
// since at.
func (w *world) started(t *testing.T, name, ip string, at time.Time) {
	t.Helper()
	p, err := w.cp.Admin.CoreV1().Pods(ns).Get(w.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "example.invalid/c", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}}
	if _, err := w.cp.Admin.CoreV1().Pods(ns).UpdateStatus(w.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
