//go:build bench

package scale

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

type csrReport struct {
	nodes int
	idle  time.Duration
	apf   bool // priority and fairness on (NODEADDR_SCALE_APF=on)

	refiled int64 // the kubelets' CSR creations refused by the server and retried

	start, mass                 []time.Duration // every Node shows its address
	startApproved, massApproved []time.Duration // every CSR approved, from the phase's start
	startLatency, massLatency   []time.Duration // filed → approved
	startCPU, massCPU, idleCPU  float64
	startReqs, massReqs         map[string]int
	idleReqs                    map[string]int
	idleActual                  time.Duration
	startFan, massFan, idleFan  fanoutCounts
	startSpan, massSpan         time.Duration // how long each phase was measured

	selfRSS, heapPerAgent float64
	goroutines            int
}

func (r *csrReport) write(t *testing.T) {
	t.Helper()
	var b strings.Builder
	n := float64(r.nodes)
	fmt.Fprintf(&b, "### Kubelet-serving CSR approval at scale: %d agents\n\n", r.nodes)
	fmt.Fprintf(&b, "`TestScaleCSR`: %d in-process agents (`agent.Agent`, as in the scale run above) with "+
		"`--approve-kubelet-serving-csr` (window %s, backstop LIST every %s %s), on one kube-apiserver %s (%s) with the "+
		"DaemonSet's policies and the kubelet-serving-csr component's RBAC and policy. The benchmark plays the "+
		"kubelets: %s after its Node shows the new ExternalIP, each files a kubelet-serving CSR for it as "+
		"system:node:NAME (impersonated). Machine: %d CPUs (%s), shared with other work. Requests from the audit "+
		"log (user `%s`; a watch counts when it starts); CSR objects delivered counted in the agents' clients.\n\n",
		r.nodes, secs(csrapproval.DefaultWindow), secs(csrBackstop), probeMode(), harness.KubernetesVersion, apfText(r.apf), secs(kubeletDelay),
		runtime.NumCPU(), cpuModel(), harness.AgentUser)
	if kubeletProbe {
		b.WriteString("Each simulated kubelet serves, from its CSR's approval on, a certificate for the addresses it asked " +
			"for (made by the benchmark: there is no kube-controller-manager), and before that none, as a bootstrapping " +
			"kubelet; the agents read it every " + secs(csrapproval.DefaultProbeInterval) + " as `TLSProbe` reads the real one.\n\n")
	}
	b.WriteString("| measure | result |\n| --- | --- |\n")
	row := func(k, format string, args ...any) { fmt.Fprintf(&b, "| %s | %s |\n", k, fmt.Sprintf(format, args...)) }
	row("start → every Node shows its ExternalIP", "%s", dist(r.start))
	row("start → every bootstrap CSR approved", "%s", dist(r.startApproved))
	row("start: CSR filed → approved", "%s", dist(r.startLatency))
	row(fmt.Sprintf("start: agent API requests per node (in %s, backstop LISTs ≈%.2f of them)", secs(r.startSpan), r.startSpan.Seconds()/csrBackstop.Seconds()),
		"%s", perNode(r.startReqs, n))
	row("start: CSR objects delivered to the agents", "%s", r.startFan.String(n))
	row("start: kube-apiserver CPU", "%.1f s (%.1f ms per node)", r.startCPU, r.startCPU/n*1000)
	row("mass renumbering → every Node converged", "%s", dist(r.mass))
	row("mass renumbering → every CSR approved", "%s", dist(r.massApproved))
	row("mass renumbering: CSR filed → approved", "%s", dist(r.massLatency))
	row(fmt.Sprintf("mass renumbering: agent API requests per node (in %s, backstop LISTs ≈%.2f of them)", secs(r.massSpan), r.massSpan.Seconds()/csrBackstop.Seconds()),
		"%s", perNode(r.massReqs, n))
	row("mass renumbering: CSR objects delivered to the agents", "%s", r.massFan.String(n))
	row("mass renumbering: kube-apiserver CPU", "%.1f s (%.1f ms per node)", r.massCPU, r.massCPU/n*1000)
	csrIdle, otherIdle := splitCSR(r.idleReqs)
	row(fmt.Sprintf("idle %s, approval on: agent requests", secs(r.idleActual)), "%d (%s) → %.2f per node-hour",
		total(r.idleReqs), byVerb(r.idleReqs), float64(total(r.idleReqs))/r.idleActual.Hours()/n)
	row("idle: of which the approver's (approval off: the rest)", "%d (%s); approval off: %d", total(csrIdle), byVerb(csrIdle), total(otherIdle))
	row("idle: CSR watches opened / CSR objects delivered", "%d / %s", r.idleFan.watches, r.idleFan.String(n))
	row("idle: kube-apiserver CPU", "%.2f s (%.1f%% of one core)", r.idleCPU, r.idleCPU/r.idleActual.Seconds()*100)
	row("the kubelets' CSR creations refused by the server (429, 5xx) and retried, whole run", "%d", r.refiled)
	row("test process (agents, kubelets, admin informers): RSS, heap in use per agent, goroutines", "%.0f MiB, %.0f KiB, %d",
		r.selfRSS, r.heapPerAgent, r.goroutines)
	out := b.String()
	fmt.Print("\n" + out)
	if f := os.Getenv("NODEADDR_BENCH_OUT"); f != "" {
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Errorf("write %s: %v", f, err)
		}
	}
}

// String: the LISTs and watches, and the CSR objects they delivered, in total and per agent; an
// agent needs only its own Node's.
func (f fanoutCounts) String(n float64) string {
	return fmt.Sprintf("%d LISTs with %d CSRs, %d watches with %d events: %.1f objects per agent",
		f.lists, f.listed, f.watches, f.events, float64(f.listed+f.events)/n)
}

// splitCSR splits request counts into those about CSRs and the others.
func splitCSR(m map[string]int) (csr, other map[string]int) {
	csr, other = map[string]int{}, map[string]int{}
	for k, v := range m {
		if strings.Contains(k, "certificatesigningrequests") {
			csr[k] = v
		} else {
			other[k] = v
		}
	}
	return csr, other
}

// probeMode says when the backstop LISTs.
func probeMode() string {
	if kubeletProbe {
		return "while the kubelet's serving certificate is not current"
	}
	return "whatever the kubelet's certificate (no probe)"
}

func apfText(on bool) string {
	if on {
		return "priority and fairness on, v1.37.2's defaults"
	}
	return "priority and fairness off"
}
