package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// writer is another controller sharing the Node: it sets a label and an annotation, a condition,
// and toggles an InternalDNS address entry of its own, each the way a careful client would.
type writer struct {
	cs             kubernetes.Interface
	node           string
	ops            atomic.Int64 // requests sent; read while it runs
	last, lastCond int          // last label/annotation and condition values accepted
	dns            bool         // whether its InternalDNS entry is present
	rate           int          // requests per second; 0: as fast as possible
	noAddresses    bool         // leave status.addresses alone
}

// run writes until stop is cancelled. Each request runs to completion (its own context), so the
// writer knows exactly which of its writes the server accepted.
func (w *writer) run(stop context.Context) {
	nodes := w.cs.CoreV1().Nodes()
	ctx := context.Background()
	var tick <-chan time.Time
	if w.rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(w.rate))
		defer t.Stop()
		tick = t.C
	}
	for i := 1; stop.Err() == nil; i++ {
		if tick != nil {
			select {
			case <-tick:
			case <-stop.Done():
				return
			}
		}
		w.ops.Add(1)
		op := i % 3
		if w.noAddresses && op == 2 {
			op = 0
		}
		switch op {
		case 0:
			p := fmt.Sprintf(`{"metadata":{"labels":{"writer":"%d"},"annotations":{"writer":"%d"}}}`, i, i)
			if _, err := nodes.Patch(ctx, w.node, types.MergePatchType, []byte(p), metav1.PatchOptions{FieldManager: "writer"}); err == nil {
				w.last = i
			}
		case 1:
			p := fmt.Sprintf(`{"status":{"conditions":[{"type":"WriterTest","status":"True","reason":"Test","message":"%d"}]}}`, i)
			if _, err := nodes.Patch(ctx, w.node, types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{FieldManager: "writer"}, "status"); err == nil {
				w.lastCond = i
			}
		case 2:
			n, err := nodes.Get(ctx, w.node, metav1.GetOptions{})
			if err != nil {
				continue
			}
			old := n.Status.Addresses
			var next []corev1.NodeAddress
			for _, a := range old {
				if a.Type != corev1.NodeInternalDNS {
					next = append(next, a)
				}
			}
			if !w.dns {
				next = append(next, corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: "concurrent.example"})
			}
			patch, _ := json.Marshal([]map[string]any{
				{"op": "test", "path": "/status/addresses", "value": old},
				{"op": "replace", "path": "/status/addresses", "value": next},
			})
			if _, err := nodes.Patch(ctx, w.node, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "writer"}, "status"); err == nil {
				w.dns = !w.dns
			}
		}
	}
}

// check fails t unless n carries the writer's last accepted label, annotation and condition.
func (w *writer) check(t *testing.T, n *corev1.Node) {
	t.Helper()
	if n.Labels["writer"] != strconv.Itoa(w.last) || n.Annotations["writer"] != strconv.Itoa(w.last) {
		t.Fatalf("writer's label/annotation lost: label %q annotation %q, want %d", n.Labels["writer"], n.Annotations["writer"], w.last)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == "WriterTest" {
			if c.Message != strconv.Itoa(w.lastCond) {
				t.Fatalf("writer's condition lost: message %q, want %d", c.Message, w.lastCond)
			}
			return
		}
	}
	if w.lastCond != 0 {
		t.Fatalf("writer's condition lost")
	}
}

func writeFile(path, data string) error { return os.WriteFile(path, []byte(data), 0o644) }

// lockedWriter serializes writes into a strings.Builder shared by stdout and stderr.
type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
