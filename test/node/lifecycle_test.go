package node

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// nodeWatch records every version of the Node the API server sends while it runs.
type nodeWatch struct {
	stop     context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	versions []*corev1.Node
}

// watchNode starts recording the Node's versions.
func (w *world) watchNode() *nodeWatch {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wi, err := w.c.CP.Admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", w.node.Name).String(),
	})
	if err != nil {
		w.t.Fatal(err)
	}
	nw := &nodeWatch{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(nw.done)
		for ev := range wi.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				nw.mu.Lock()
				nw.versions = append(nw.versions, n)
				nw.mu.Unlock()
			}
		}
	}()
	return nw
}

// finish stops the watch and returns the versions seen.
func (nw *nodeWatch) finish() []*corev1.Node {
	nw.stop()
	<-nw.done
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.versions
}

// assertSteady fails t for any version whose addresses differ from want or that has the taint.
func assertSteady(t *testing.T, versions []*corev1.Node, want []corev1.NodeAddress) {
	t.Helper()
	for _, n := range versions {
		if !reflect.DeepEqual(n.Status.Addresses, want) {
			t.Errorf("Node version %s has addresses %v, want %v throughout", n.ResourceVersion, n.Status.Addresses, want)
		}
		if harness.HasTaint(n, uninitialized) {
			t.Errorf("Node version %s has the %s taint again", n.ResourceVersion, uninitialized)
		}
	}
}

// rollingUpdate: a changed DaemonSet argument is rolled out by the controller (maxSurge 0: the old
// pod goes, then the new one starts); the Node's addresses never disappear or change, the taint
// never returns, and the new agent writes nothing (nothing changed).
func (w *world) rollingUpdate(t *testing.T) {
	w.t = t
	want := expectedAddresses(w.node.Name)
	old := w.agentPod()
	writesBefore := len(w.agentWrites())
	nw := w.watchNode()
	start := time.Now()
	w.kubectlAdmin("-n", "kube-system", "patch", "daemonset", "nodeaddr", "--type", "json", "-p",
		`[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--log-level=debug"}]`)
	w.kubectlAdmin("-n", "kube-system", "rollout", "status", "daemonset/nodeaddr", "--timeout=3m")
	var p *corev1.Pod
	harness.Eventually(w.t, 2*time.Minute, 100*time.Millisecond, "the new agent pod Ready", func() (bool, string) {
		p = w.agentPod()
		return p != nil && p.UID != old.UID && podReady(p), podSeen(p)
	})
	// Ready means reconciled (/readyz): a write, if the agent saw a difference, happened before.
	rolled := time.Since(start)
	versions := nw.finish()
	assertSteady(t, versions, want)
	writes := len(w.agentWrites()) - writesBefore
	if writes != 0 {
		t.Errorf("the rolled agent made %d Node writes, want 0 (nothing changed)", writes)
	}
	report(t, "rollout %s, %d Node versions seen, all %d addresses steady, %d agent writes",
		rolled.Round(time.Second), len(versions), len(want), writes)
}

// uninstall: `kubectl delete -k` of the overlay removes the agent and leaves the Node's addresses as
// they were; the kubelet's status and lease writes keep succeeding during and after it.
func (w *world) uninstall(t *testing.T) {
	w.t = t
	before := w.node.Node(w.t).Status.Addresses
	mark := time.Now()
	nw := w.watchNode()
	w.kubectlAdmin("delete", "-k", w.overlay(), "--wait=true")
	harness.Eventually(w.t, 2*time.Minute, 100*time.Millisecond, "the agent pod gone", func() (bool, string) { p := w.agentPod(); return p == nil, podSeen(p) })
	// Two kubelet lease renewals (every 10 s) after the agent went.
	gone := time.Now()
	harness.Eventually(w.t, time.Minute, 100*time.Millisecond, "two kubelet lease renewals after the uninstall", func() (bool, string) {
		n := w.kubeletWrites(gone).ok["leases"]
		return n >= 2, fmt.Sprintf("%d renewals", n)
	})
	assertSteady(t, nw.finish(), before)
	if after := w.node.Node(w.t).Status.Addresses; !reflect.DeepEqual(after, before) {
		t.Errorf("addresses after uninstall %v, want %v", after, before)
	}
	kw := w.kubeletWrites(mark)
	if len(kw.failed) > 0 {
		t.Errorf("kubelet writes failed during/after the uninstall: %v", kw.failed)
	}
	report(t, "addresses kept (%d), kubelet writes since uninstall: %v ok, %d failed", len(before), kw.ok, len(kw.failed))
}

// kubeletWrites are the kubelet's writes to its Node, Node status and Lease since from.
type kubeletWrites struct {
	ok     map[string]int
	failed []string
}

func (w *world) kubeletWrites(from time.Time) kubeletWrites {
	kw := kubeletWrites{ok: map[string]int{}}
	for _, r := range w.audit("system:node:" + w.node.Name) {
		if r.Timestamp.Before(from) || r.ObjectRef == nil || (r.Verb != "patch" && r.Verb != "update") {
			continue
		}
		key := r.ObjectRef.Resource
		if r.ObjectRef.Subresource != "" {
			key += "/" + r.ObjectRef.Subresource
		}
		if key != "nodes" && key != "nodes/status" && key != "leases" {
			continue
		}
		if r.ResponseStatus != nil && r.ResponseStatus.Code < 300 {
			kw.ok[key]++
		} else {
			kw.failed = append(kw.failed, fmt.Sprintf("%s %s %v", r.Verb, key, r.ResponseStatus))
		}
	}
	return kw
}
