//go:build bench

package node

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// benchRuns is how many fresh real nodes the registration benchmark starts.
const benchRuns = 5

// TestRegistrationToTaintRemoved measures, on fresh real nodes, the time from the kubelet's Node
// registration (its create request in the audit log) to the agent's taint removal, with the shipped
// base applied as soon as the Node exists; NODEADDR_BENCH_OUT receives a BENCHMARKS.md section.
func TestRegistrationToTaintRemoved(t *testing.T) {
	var total, fromApply []time.Duration
	for i := 0; i < benchRuns; i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			w := newWorld(t, harness.NodeOptions{}, nil)
			applied := time.Now()
			w.kubectlAdmin("apply", "-k", w.overlay())
			w.waitFor("the taint removed", 3*time.Minute, func() bool { return !hasTaint(w.node.Node(w.t), uninitialized) })
			removed := w.taintRemovedAt()
			total = append(total, removed.Sub(w.registeredAt()))
			fromApply = append(fromApply, removed.Sub(applied))
		})
	}
	if len(total) < benchRuns {
		t.Fatalf("%d of %d runs completed", len(total), benchRuns)
	}
	slices.Sort(total)
	slices.Sort(fromApply)
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Real node: kubelet registration → taint removed\n\n")
	fmt.Fprintf(&b, "%d fresh nodes (kubelet %s, containerd %s, runc %s; `make test-node`'s harness), the shipped base\n", benchRuns, harness.KubernetesVersion, harness.ContainerdVersion, harness.RuncVersion)
	fmt.Fprintf(&b, "applied with `kubectl apply -k` as soon as the Node exists; times from the audit log.\n\n")
	fmt.Fprintf(&b, "| | p50 | min | max |\n| --- | --- | --- | --- |\n")
	row := func(name string, d []time.Duration) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, d[len(d)/2].Round(time.Millisecond), d[0].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	}
	row("registration → taint removed", total)
	row("kubectl apply → taint removed", fromApply)
	t.Log(b.String())
	if out := os.Getenv("NODEADDR_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
