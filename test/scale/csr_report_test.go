//go:build bench

package scale

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

type csrReport struct {
	nodes       int
	apf         bool // priority and fairness on (NODEADDR_SCALE_APF=on)
	cidrObjects bool // the API server serves ServiceCIDRs (the approver's fifth informer)

	start, mass, idle csrPhase

	refiled int64 // the kubelets' CSR creations refused by the server and retried

	selfRSS, heapPerAgent float64
	goroutines            int
	approverHeap          float64 // MiB the approver released when stopped
}

// csrPhase is what one phase measured.
type csrPhase struct {
	nodes      []time.Duration // every Node shows its address, from the phase's start
	approvedAt []time.Duration // every CSR approved, from the phase's start
	latency    []time.Duration // CSR created → approved
	span       time.Duration   // how long the phase was measured

	cpu             cpuSplit // this process's CPU profile: total and the approver's goroutines
	apiCPU, selfCPU float64  // kube-apiserver's and this process's CPU seconds (/proc)
	received        receivedCounts
	verdicts        map[string]float64 // the approver's counters over the phase
	approverReqs    map[string]int
	agentReqs       map[string]int
}

func (r *csrReport) write(t *testing.T) {
	t.Helper()
	var b strings.Builder
	n := float64(r.nodes)
	fmt.Fprintf(&b, "### Kubelet-serving CSR approval at scale: %d agents, one approver\n\n", r.nodes)
	fmt.Fprintf(&b, "`TestScaleCSR`: %d in-process agents (`agent.Agent`, as in the scale run above) with "+
		"`--approval-record`, and one approver (`csrapproval.Controller` as `nodeaddr approver --leader-elect=false` "+
		"runs it, its default workers, ServiceCIDR informer %s) with its own ServiceAccount token (`%s`), client "+
		"(QPS %d, burst %d) and connection, all in the test process, on one kube-apiserver %s (%s) with the "+
		"DaemonSet's policies and the kubelet-serving-csr component's RBAC and policies. The benchmark plays the "+
		"kubelets: %s after its Node shows the new ExternalIP, each files a kubelet-serving CSR for it and its "+
		"name as system:node:NAME (impersonated); nothing signs them. Machine: %d CPUs (%s), shared with other "+
		"work: the times and CPU figures are noisy. Requests from the audit log (a watch counts when it starts). "+
		"Objects received: counted in the approver's clientset (LIST items and watch events, bookmarks aside; "+
		"client-go's watch-list brings the initial list as events). Approver CPU: its goroutines' share of a CPU "+
		"profile of the test process (pprof label; the garbage collector's background work counts in the "+
		"process's total only). Approver heap: the live heap it released when stopped at the end.\n\n",
		r.nodes, onOff(r.cidrObjects), approverUser, approverQPS, approverBurst, harness.KubernetesVersion,
		apfText(r.apf), secs(kubeletDelay), runtime.NumCPU(), cpuModel())
	b.WriteString("| measure | result |\n| --- | --- |\n")
	row := func(k, format string, args ...any) { fmt.Fprintf(&b, "| %s | %s |\n", k, fmt.Sprintf(format, args...)) }
	for _, ph := range []struct {
		name, nodes string
		p           *csrPhase
	}{
		{"start", "every Node shows its ExternalIP", &r.start},
		{"mass renumbering", "every Node shows its new ExternalIP", &r.mass},
	} {
		p := ph.p
		row(ph.name+" → "+ph.nodes, "%s", dist(p.nodes))
		row(ph.name+" → every CSR approved", "%d of %d; %s", len(p.approvedAt), r.nodes, dist(p.approvedAt))
		row(ph.name+": CSR created → approved", "%s", dist(p.latency))
		row(ph.name+": the approver's verdicts", "%s", verdictText(p.verdicts))
		row(fmt.Sprintf("%s: approver API requests (in %s)", ph.name, secs(p.span)), "%d (%s)", total(p.approverReqs), byVerb(p.approverReqs))
		row(ph.name+": objects received by the approver", "%s", p.received.String(n))
		row(ph.name+": CPU: approver / test process / kube-apiserver", "%s / %.1f s / %.1f s", p.cpu.approverText(n), p.selfCPU, p.apiCPU)
		row(ph.name+": agent API requests per node", "%s", perNode(p.agentReqs, n))
	}
	i := &r.idle
	row(fmt.Sprintf("idle %s: approver API requests", secs(i.span)), "%d (%s)", total(i.approverReqs), byVerb(i.approverReqs))
	row("idle: objects received by the approver", "%s", i.received.String(n))
	row("idle: agent API requests", "%d (%s) → %.2f per node-hour", total(i.agentReqs), byVerb(i.agentReqs),
		float64(total(i.agentReqs))/i.span.Hours()/n)
	row("idle: CPU: approver / test process / kube-apiserver", "%s / %.2f s / %.2f s (%.1f%% of one core)",
		i.cpu.approverText(0), i.selfCPU, i.apiCPU, i.apiCPU/i.span.Seconds()*100)
	row("the kubelets' CSR creations refused by the server (429, 5xx) and retried, whole run", "%d", r.refiled)
	row(fmt.Sprintf("approver heap (its caches of %d Nodes and %d CSRs, queue, client)", r.nodes, 2*r.nodes), "%.1f MiB", r.approverHeap)
	row("test process (agents, approver, kubelets, admin informers): RSS, heap in use per agent, goroutines", "%.0f MiB, %.0f KiB, %d",
		r.selfRSS, r.heapPerAgent, r.goroutines)
	out := b.String()
	fmt.Print("\n" + out)
	if f := os.Getenv("NODEADDR_BENCH_OUT"); f != "" {
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Errorf("write %s: %v", f, err)
		}
	}
}

// String: the CSR and Node objects the approver's informers received, and per CSR filed (one per
// node and phase) or per node.
func (c receivedCounts) String(n float64) string {
	return fmt.Sprintf("CSRs %d (%.2f per node; %d LISTs, %d watches), Nodes %d (%.2f per node; %d LISTs, %d watches)",
		c.csrs.objects(), float64(c.csrs.objects())/n, c.csrs.lists, c.csrs.watches,
		c.nodes.objects(), float64(c.nodes.objects())/n, c.nodes.lists, c.nodes.watches)
}

// approverText is the approver's CPU, per CSR when csrs > 0.
func (c cpuSplit) approverText(csrs float64) string {
	if c.err != nil {
		return fmt.Sprintf("n/a (%v)", c.err)
	}
	s := fmt.Sprintf("%.2f s", c.approver.Seconds())
	if csrs > 0 {
		s += fmt.Sprintf(" (%.1f ms per CSR)", c.approver.Seconds()/csrs*1000)
	}
	if c.total > 0 {
		s += fmt.Sprintf(", %.0f%% of the profiled %.1f s", c.approver.Seconds()/c.total.Seconds()*100, c.total.Seconds())
	}
	return s
}

// verdictText: the approvals, and the CSRs left pending at some point, by reason (the phase ends
// only when every CSR is approved: each was approved later).
func verdictText(v map[string]float64) string {
	s := fmt.Sprintf("approved %.0f", v["approved"])
	var pending []string
	for _, k := range sortedKeys(floatKeys(v)) {
		if r, ok := strings.CutPrefix(k, "pending "); ok {
			pending = append(pending, fmt.Sprintf("%s %.0f", r, v[k]))
		}
	}
	if len(pending) == 0 {
		return s + "; none left pending on the way"
	}
	return s + "; left pending on the way, then approved: " + strings.Join(pending, ", ")
}

func floatKeys(m map[string]float64) map[string]int {
	out := make(map[string]int, len(m))
	for k := range m {
		out[k] = 0
	}
	return out
}

func apfText(on bool) string {
	if on {
		return "priority and fairness on, v1.37.2's defaults"
	}
	return "priority and fairness off"
}
