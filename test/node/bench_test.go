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
			w := newWorld(t, worldOptions{})
			applied := time.Now()
			w.kubectlAdmin("apply", "-k", w.overlay())
			harness.Eventually(w.t, 3*time.Minute, 100*time.Millisecond, "the taint removed", func() (bool, string) {
				taints := harness.TaintKeys(w.node.Node(w.t))
				return !slices.Contains(taints, uninitialized), fmt.Sprintf("taints %v", taints)
			})
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

// renumberRuns is how many renumberings the renumbering-day benchmark times (half make-before-break).
const renumberRuns = 6

// TestRenumberingToExec measures, on one hardened real node with nodeaddr's central approver
// approving the kubelet's serving CSRs (TestRenumberingDay's world), the time from a renumbering in
// the kernel to kubectl logs and exec working again, and where it goes; NODEADDR_BENCH_OUT receives
// a BENCHMARKS.md section.
func TestRenumberingToExec(t *testing.T) {
	d := newDay(t)
	if !t.Run("fresh", d.fresh) {
		return
	}
	var runs []dayTimes
	from := uplinkV4
	for i := range renumberRuns {
		to := fmt.Sprintf("192.0.2.%d", 20+10*i)
		move, name := d.makeBeforeBreak, "make-before-break"
		if i%2 == 1 {
			move, name = d.breakBeforeMake, "break-before-make"
		}
		if !t.Run(fmt.Sprintf("%d-%s", i, name), func(t *testing.T) { runs = append(runs, d.renumber(t, from, to, move)) }) {
			t.FailNow()
		}
		from = to
	}
	col := func(get func(dayTimes) (time.Duration, bool)) []time.Duration {
		var out []time.Duration
		for _, r := range runs {
			if v, ok := get(r); ok {
				out = append(out, v)
			}
		}
		slices.Sort(out)
		return out
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Real node: renumbering → kubectl logs and exec working\n\n")
	fmt.Fprintf(&b, "%d renumberings of one hardened real node (`TestRenumberingToExec`, build tag `bench`; kubelet %s with `serverTLSBootstrap`, API server with `--kubelet-certificate-authority`), alternately make-before-break and break-before-make, with the kubelet-serving-csr component (the central approver, a Deployment on the node's pod network, the only approver) and kube-proxy (nftables, `--nodeport-addresses=primary`). Times from the first `ip` command of the move; phases polled every 100 ms; \"working\" includes the two kubectl runs; the NodePort is checked once logs and exec work (an upper bound).\n\n", renumberRuns, harness.KubernetesVersion)
	fmt.Fprintf(&b, "| from the kernel change to | p50 | min | max |\n| --- | --- | --- | --- |\n")
	row := func(name string, d []time.Duration) {
		if len(d) == 0 {
			fmt.Fprintf(&b, "| %s | not seen | | |\n", name)
			return
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, d[len(d)/2].Round(10*time.Millisecond), d[0].Round(10*time.Millisecond), d[len(d)-1].Round(10*time.Millisecond))
	}
	for _, p := range phases {
		row(p, col(func(r dayTimes) (time.Duration, bool) { v, ok := r.phase[p]; return v, ok }))
	}
	row("kubectl logs and exec working", col(func(r dayTimes) (time.Duration, bool) { return r.working, true }))
	row("kube-proxy exited (NodeIPs changed), restarted", col(func(r dayTimes) (time.Duration, bool) { return r.proxyExit, true }))
	row("NodePort answering on the new address", col(func(r dayTimes) (time.Duration, bool) { return r.nodePort, true }))
	b.WriteString("\n")
	t.Log(b.String())
	if out := os.Getenv("NODEADDR_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
