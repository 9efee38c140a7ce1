//go:build bench

package scale

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// target is the fleet size the extrapolation is for.
const target = 5000

// Derived, not measured, rates used by the extrapolation.
const (
	// client-go's reflector ends each watch after a random 5–10 min (tools/cache/reflector.go,
	// defaultMinWatchTimeout) and re-watches from its last resourceVersion: 60/7.5 = 8 per hour.
	watchRenewalsPerNodeHour = 8
	// The kubelet renews its Lease every 10 s (nodeLeaseDurationSeconds 40 × 0.25).
	kubeletLeasePerNodeHour = 360
	// local-ccm polls every 10 s with two full GETs of the Node (REFERENCE.md, "Anchors' numbers").
	pollingPerNodeHour = 720
)

type report struct {
	nodes     int
	idle      time.Duration
	fleetNice int // NODEADDR_SCALE_FLEET_NICE: the test process's nice value (the control plane's is 0)

	nodesSetup, tokensSetup time.Duration
	start, taint, mass      []time.Duration
	startCPU, massCPU       float64
	idleCPU                 float64
	startReqs, massReqs     map[string]int
	idleReqs                map[string]int
	idleActual              time.Duration

	selfRSS, heapPerAgent                  float64
	goroutines                             int
	apiRSSBefore, apiRSSAgents, apiRSSIdle float64
	startObs, massObs, idleObs             counters

	apf               bool    // kube-apiserver ran with priority and fairness
	flowSchema        bool    // with deploy/flowcontrol.yaml's FlowSchema and priority level
	bystanders, flows string  // their tables (flows empty with priority and fairness off)
	bystandersServer  string  // the bystanders' requests as kube-apiserver timed them
	etcdMiB           float64 // etcd's data directory after the idle phase
}

func (r *report) write(t *testing.T) {
	t.Helper()
	var b strings.Builder
	n := float64(r.nodes)
	scale := float64(target) / n
	idleTotal := total(r.idleReqs)
	idleRate := float64(idleTotal) / r.idleActual.Seconds()
	idlePerNodeHour := idleRate / n * 3600
	massWrites := r.massReqs["patch nodes/status"] + r.massReqs["patch nodes"] + r.massReqs["update nodes/status"] +
		r.massReqs["update nodes"]
	rejected := 0
	for k, v := range r.massReqs {
		if strings.HasSuffix(k, "(429)") {
			rejected += v
		}
	}

	fmt.Fprintf(&b, "### Scale: %d agents on one kube-apiserver\n\n", r.nodes)
	fmt.Fprintf(&b, "%d in-process agents (`agent.Agent` over a scripted kernel instead of netlink), each with its own Node, "+
		"pod-bound ServiceAccount token, client (the agent's own, `internal/kube`) and TLS connection (QPS %d, burst %d), publish rate %d/s burst %d, "+
		"a real event recorder, ExternalIP managed, taint removal on. One kube-apiserver %s with etcd on loopback, "+
		"priority and fairness "+onOff(r.apf)+flowSchemaNote(r.flowSchema)+", "+
		"audit log at Metadata level (blocking), the DaemonSet's ValidatingAdmissionPolicy active. Machine: %d CPUs (%s), "+
		"shared by the control plane and the agents"+niceNote(r.fleetNice)+". Convergence is seen through one admin watch on all Nodes; "+
		"API requests are counted from the audit log (user `%s`; a watch counts when it starts).\n\n",
		r.nodes, clientQPS, clientBurst, publishRate, publishBurst, harness.KubernetesVersion, runtime.NumCPU(),
		cpuModel(), harness.AgentUser)

	b.WriteString("| measure | result |\n| --- | --- |\n")
	row := func(k, format string, args ...any) { fmt.Fprintf(&b, "| %s | %s |\n", k, fmt.Sprintf(format, args...)) }
	row("setup: Nodes (create + kubelet status) / Pods + bound tokens", "%s / %s", secs(r.nodesSetup), secs(r.tokensSetup))
	row("start → every Node shows its ExternalIP", "%s", dist(r.start))
	row("start → every uninitialized taint removed", "%s", dist(r.taint))
	row("start: API requests per node", "%s", perNode(r.startReqs, n))
	row("start: kube-apiserver CPU", "%.1f s (%.1f ms per node)", r.startCPU, r.startCPU/n*1000)
	row("mass change (every agent at once) → every Node converged", "%s", dist(r.mass))
	row("mass change: API requests per node", "%s; successful Node writes: %d for %d nodes; rejected with 429: %d",
		perNode(r.massReqs, n), massWrites, r.nodes, rejected)
	row("mass change: kube-apiserver CPU", "%.1f s (%.1f ms per node)", r.massCPU, r.massCPU/n*1000)
	row(fmt.Sprintf("idle %s (every agent resynced once, halfway): agent requests", secs(r.idleActual)),
		"%d (%s) → %.3f req/s for %d agents, %.2f per node-hour", idleTotal, byVerb(r.idleReqs), idleRate, r.nodes, idlePerNodeHour)
	row("idle: kube-apiserver CPU", "%.2f s (%.1f%% of one core)", r.idleCPU, r.idleCPU/r.idleActual.Seconds()*100)
	row("agents' write conflicts / write errors / overwrites detected: start; mass change; idle", "%s; %s; %s%s",
		r.startObs, r.massObs, r.idleObs, falsePositive(r.startObs.overwrites+r.massObs.overwrites+r.idleObs.overwrites))
	row("kube-apiserver RSS: Nodes only / agents converged / after idle", "%.0f / %.0f / %.0f MiB (%.0f KiB per agent)",
		r.apiRSSBefore, r.apiRSSAgents, r.apiRSSIdle, (r.apiRSSAgents-r.apiRSSBefore)*1024/n)
	row("test process (all agents + admin informer): RSS, heap in use per agent, goroutines", "%.0f MiB, %.0f KiB, %d",
		r.selfRSS, r.heapPerAgent, r.goroutines)

	row("etcd data directory after the idle phase", "%.0f MiB", r.etcdMiB)

	fmt.Fprintf(&b, "\n#### Bystanders at %d agents (priority and fairness %s)\n\n"+
		"%d simulated kubelets renew their Lease every 10 s as `system:node:NAME`, and a controller (`%s`) GETs one "+
		"Node a second and LISTs all Nodes every 30 s, each on its own connection, for the whole run.\n\n%s",
		r.nodes, onOff(r.apf), min(bystanderKubelets, r.nodes), controllerUser, r.bystanders)
	if r.bystandersServer != "" {
		b.WriteString("\nThe same requests as kube-apiserver timed them, from receipt to response (its audit log; the " +
			"Kubernetes SLO measures API call latency on the server): without the time they waited in the bystanders' " +
			"own process, which shares this machine's cores with the in-process fleet, and without the waits for a " +
			"connection. Watches are left out.\n\n" + r.bystandersServer)
	}
	if r.flows != "" {
		fmt.Fprintf(&b, "\nWhere the requests landed (kube-apiserver's `apiserver_flowcontrol_dispatched_requests_total` "+
			"and `apiserver_flowcontrol_rejected_requests_total` at the end of the run, and each level's "+
			"`apiserver_flowcontrol_nominal_limit_seats`; the agents authenticate as the `%s` ServiceAccount%s):\n\n%s",
			harness.AgentUser, flowSchemaNote(r.flowSchema), r.flows)
	}
	if r.nodes >= target {
		b.WriteString("\n")
		out := b.String()
		fmt.Print("\n" + out)
		r.save(t, out)
		return
	}

	fmt.Fprintf(&b, "\n#### Extrapolation to %d nodes\n\n", target)
	fmt.Fprintf(&b, "| | %d nodes (measured) | %d nodes |\n| --- | --- | --- |\n", r.nodes, target)
	fmt.Fprintf(&b, "| idle agent requests, measured window | %.3f req/s | %.3f req/s (linear) |\n", idleRate, idleRate*scale)
	renewals := r.idleActual < 5*time.Minute
	if renewals {
		fmt.Fprintf(&b, "| idle watch renewals (derived: client-go re-watches every 5–10 min; the %s window is shorter) | "+
			"%d per node-hour = %.2f req/s | %.1f req/s |\n",
			secs(r.idleActual), watchRenewalsPerNodeHour, watchRenewalsPerNodeHour*n/3600, watchRenewalsPerNodeHour*float64(target)/3600)
	}
	fmt.Fprintf(&b, "| mass change: agent requests | %d | ≈%d |\n", total(r.massReqs), int(math.Round(float64(total(r.massReqs))*scale)))
	fmt.Fprintf(&b, "| mass change → all converged (this machine, linear in writes) | %s | ≈%s |\n",
		secs(maxOf(r.mass)), secs(time.Duration(float64(maxOf(r.mass))*scale)))
	fmt.Fprintf(&b, "| mass change: kube-apiserver CPU | %.1f s | ≈%.0f s |\n", r.massCPU, r.massCPU*scale)
	fmt.Fprintf(&b, "| kube-apiserver memory for the agents' clients and watches | %.0f MiB | ≈%.0f MiB |\n",
		r.apiRSSAgents-r.apiRSSBefore, (r.apiRSSAgents-r.apiRSSBefore)*scale)
	fmt.Fprintf(&b, "| for comparison: kubelet Lease renewals (every 10 s) | %.0f req/s | %.0f req/s |\n",
		kubeletLeasePerNodeHour*n/3600, kubeletLeasePerNodeHour*float64(target)/3600)
	fmt.Fprintf(&b, "| for comparison: a 10 s polling agent (local-ccm, 2 GETs per loop) | %.0f req/s | %.0f req/s |\n",
		pollingPerNodeHour*n/3600, pollingPerNodeHour*float64(target)/3600)

	idleNote := fmt.Sprintf("Idle, the agents made %d requests in %s", idleTotal, secs(r.idleActual))
	if renewals {
		idleNote += fmt.Sprintf("; what remains over an hour is each agent's Node watch being renewed by client-go "+
			"(≈%d per node-hour, no LIST), so at %d nodes nodeaddr costs ≈%.0f req/s, ≈%.0f× less than the kubelet's "+
			"own Lease renewals and ≈%.0f× less than a 10 s polling agent",
			watchRenewalsPerNodeHour, target, watchRenewalsPerNodeHour*float64(target)/3600,
			float64(kubeletLeasePerNodeHour)/watchRenewalsPerNodeHour, float64(pollingPerNodeHour)/watchRenewalsPerNodeHour)
	}
	fmt.Fprintf(&b, "\n%s. A mass change costs one successful Node write and one Event per node; its duration is "+
		"dominated by the API server's write path (admission with the CEL policy, etcd, audit) on this "+
		"%d-CPU machine shared with %d agents, and by the in-flight limit: "+inflightNote(r.apf)+
		" Either way the time grows linearly with the fleet unless the control plane "+
		"has more cores. The %d open watches cost memory, not requests: the watch cache indexes watchers by "+
		"`metadata.name` field selector (k8s.io/apiserver `pkg/storage/cacher`, `startDispatching`), so one "+
		"Node update reaches one agent, not all of them.\n",
		idleNote, runtime.NumCPU(), r.nodes, r.nodes)

	out := b.String()
	fmt.Print("\n" + out)
	r.save(t, out)
}

func (r *report) save(t *testing.T, out string) {
	if f := os.Getenv("NODEADDR_BENCH_OUT"); f != "" {
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Errorf("write %s: %v", f, err)
		}
	}
}

func total(m map[string]int) int {
	s := 0
	for _, v := range m {
		s += v
	}
	return s
}

func byVerb(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func perNode(m map[string]int, n float64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%.2f %s", float64(m[k])/n, k))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// dist formats the slowest delay and the percentiles.
func dist(d []time.Duration) string {
	if len(d) == 0 {
		return "no samples"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	p := func(q float64) time.Duration { return s[max(int(math.Ceil(q*float64(len(s))))-1, 0)] }
	return fmt.Sprintf("all in %s (p50 %s, p95 %s, p99 %s)", secs(s[len(s)-1]), secs(p(0.5)), secs(p(0.95)), secs(p(0.99)))
}

func maxOf(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return slices.Max(d)
}

func secs(d time.Duration) string {
	if d < 0 { // before the reference instant (an outage write answered before /readyz said 200)
		return secs(-d) + " before"
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return d.Round(time.Second).String()
	}
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func falsePositive(overwrites int64) string {
	if overwrites == 0 {
		return ""
	}
	return " (no other writer runs here: every overwrite detected is a false positive, and each one also " +
		"emits an AddressesOverwritten Event)"
}

// niceNote says when the fleet ran at a lower CPU priority than the control plane.
func niceNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (the agents and bystanders at nice %d, kube-apiserver and etcd at 0: `NODEADDR_SCALE_FLEET_NICE=%d`)", n, n)
}

// flowSchemaNote says which FlowSchemas classified the agents' requests.
func flowSchemaNote(on bool) string {
	if on {
		return " with deploy/flowcontrol.yaml's FlowSchema and priority level `" + flowSchemaName + "` applied " +
			"(`NODEADDR_SCALE_FLOWSCHEMA=on`)"
	}
	return ""
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func inflightNote(apf bool) string {
	if apf {
		return "with priority and fairness on, as here, writes beyond a priority level's seats queue instead of being rejected."
	}
	return "this run has priority and fairness off, so more than 200 concurrent writes (--max-mutating-requests-inflight) " +
		"get 429 and client-go retries them after Retry-After (1 s); with priority and fairness, as in a real " +
		"cluster, they queue instead."
}
