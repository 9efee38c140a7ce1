package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// writer is another controller sharing the Node: a label and an annotation, a condition, and an
// InternalDNS address entry it toggles, each written the way a careful client writes. It remembers
// what the server accepted last, so that a lost field is noticed (invariant 3).
type writer struct {
	cs kubernetes.Interface

	mu        sync.Mutex // held for each request and by check
	i         int
	label     int  // last accepted label/annotation value (0: none)
	cond      int  // last accepted condition message
	dns       bool // whether its InternalDNS entry is present
	burstTill time.Time
}

// run writes every 200 ms (every 20 ms during a burst) until ctx ends.
func (w *writer) run(ctx context.Context) {
	for ctx.Err() == nil {
		w.mu.Lock()
		burst := time.Now().Before(w.burstTill)
		w.step()
		w.mu.Unlock()
		d := 200 * time.Millisecond
		if burst {
			d = 20 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
}

func (w *writer) burst(d time.Duration) {
	w.mu.Lock()
	w.burstTill = time.Now().Add(d)
	w.mu.Unlock()
}

// reset forgets the writer's fields (the Node was deleted).
func (w *writer) reset() {
	w.mu.Lock()
	w.label, w.cond, w.dns = 0, 0, false
	w.mu.Unlock()
}

func (w *writer) step() {
	w.i++
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes := w.cs.CoreV1().Nodes()
	opts := metav1.PatchOptions{FieldManager: "soak-writer"}
	switch w.i % 3 {
	case 0:
		p := fmt.Sprintf(`{"metadata":{"labels":{"soak-writer":"%d"},"annotations":{"soak-writer":"%d"}}}`, w.i, w.i)
		if _, err := nodes.Patch(ctx, nodeName, types.MergePatchType, []byte(p), opts); err == nil {
			w.label = w.i
		}
	case 1:
		p := fmt.Sprintf(`{"status":{"conditions":[{"type":"SoakWriter","status":"True","reason":"Soak","message":"%d"}]}}`, w.i)
		if _, err := nodes.Patch(ctx, nodeName, types.StrategicMergePatchType, []byte(p), opts, "status"); err == nil {
			w.cond = w.i
		}
	case 2:
		n, err := nodes.Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return
		}
		old := n.Status.Addresses
		next := slices.DeleteFunc(slices.Clone(old), func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeInternalDNS })
		present := len(next) != len(old)
		if !present {
			next = append(next, corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: "soak.internal.example"})
		}
		patch, _ := json.Marshal([]map[string]any{
			{"op": "test", "path": "/status/addresses", "value": old},
			{"op": "replace", "path": "/status/addresses", "value": next},
		})
		if _, err := nodes.Patch(ctx, nodeName, types.JSONPatchType, patch, opts, "status"); err == nil {
			w.dns = !present
		}
	}
}

// check reports the writer's fields n lost, "" when none; the caller holds the writer's lock.
func (w *writer) check(n *corev1.Node) string {
	if w.label != 0 && (n.Labels["soak-writer"] != strconv.Itoa(w.label) || n.Annotations["soak-writer"] != strconv.Itoa(w.label)) {
		return fmt.Sprintf("label/annotation %q/%q, want %d", n.Labels["soak-writer"], n.Annotations["soak-writer"], w.label)
	}
	if w.cond != 0 {
		i := slices.IndexFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == "SoakWriter" })
		if i < 0 || n.Status.Conditions[i].Message != strconv.Itoa(w.cond) {
			return fmt.Sprintf("condition SoakWriter lost or stale, want message %d", w.cond)
		}
	}
	hasDNS := slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeInternalDNS })
	if hasDNS != w.dns {
		return fmt.Sprintf("InternalDNS entry present %v, want %v", hasDNS, w.dns)
	}
	return ""
}

// lock pauses the writer (for a check or a Node recreation); unlock resumes it.
func (w *writer) lock()   { w.mu.Lock() }
func (w *writer) unlock() { w.mu.Unlock() }

// revert is a kubelet without --cloud-provider=external: every 500 ms for d it replaces the whole
// address list with its own (its InternalIP and the Hostname), as an update without a precondition.
// It pauses the writer around each revert: an update without a precondition would otherwise undo
// the writer's condition, which is the reverter's doing, not nodeaddr's.
func revert(cs kubernetes.Interface, w *writer, d time.Duration) int {
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(500 * time.Millisecond) { // measured window: d, a revert every 500 ms
		w.lock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		node, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err == nil {
			kubelet := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: kubeletIP}, {Type: corev1.NodeHostName, Address: nodeName}}
			// The kubelet's list keeps entries of types it does not own (the writer's InternalDNS).
			for _, a := range node.Status.Addresses {
				if a.Type == corev1.NodeInternalDNS {
					kubelet = append(kubelet, a)
				}
			}
			node.Status.Addresses = kubelet
			node.ResourceVersion = ""
			if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{FieldManager: "kubelet"}); err == nil {
				n++
			}
		}
		cancel()
		w.unlock()
	}
	return n
}
