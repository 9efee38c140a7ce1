package e2e

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// nodeLog records every address list a client-go watch on one Node delivers, with when.
type nodeLog struct {
	mu     sync.Mutex
	seen   []nodeSeen
	closed bool
}

type nodeSeen struct {
	at    time.Time
	addrs string
}

func watchNodeLog(t *testing.T, cp *harness.ControlPlane, node string) *nodeLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := cp.Admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	if err != nil {
		t.Fatal(err)
	}
	l := &nodeLog{}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				at := time.Now()
				l.mu.Lock()
				l.seen = append(l.seen, nodeSeen{at, harness.FormatAddrs(n.Status.Addresses)})
				l.mu.Unlock()
			}
		}
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
	}()
	return l
}

func (l *nodeLog) since(i int) []nodeSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen[min(i, len(l.seen)):])
}

// distinct is the lists seen, repeats of one list collapsed.
func (l *nodeLog) distinct() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.seen))
	for _, s := range l.seen {
		out = append(out, s.addrs)
	}
	return slices.Compact(out)
}
