//go:build bench

package scale

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// spreadGoal is the criterion for a fleet recovering from an outage: the peak one-second
// PATCH rate at most this many times the mean over the recovery window.
const spreadGoal = 2.0

// outageReport holds TestScaleOutage's timestamps and what the audit log says about them.
type outageReport struct {
	nodes                 int
	apf                   bool // NODEADDR_SCALE_APF=on: priority and fairness with v1.37.2's defaults
	flowSchema            bool // NODEADDR_SCALE_FLOWSCHEMA=on: deploy/flowcontrol.yaml applied
	loadBefore, loadAfter string

	stopped            time.Time // kube-apiserver exited; every agent is then handed a new address
	restarted          time.Time // the new kube-apiserver process is started
	ready              time.Time // its /readyz answers 200
	failedDuringOutage int64     // write attempts the agents counted as failed while the server was down
	obs                counters  // the agents' write outcomes from the stop to convergence

	// From the audit log: the agents' PATCH requests on nodes (any subresource).
	start, end time.Time       // the recovery window
	received   []time.Time     // arrival of each PATCH in the window, in order
	series     []second        // PATCHes per second of the window, from start
	ok         int             // 2xx responses
	writes     []time.Duration // per Node: ready → completion of its agent's last successful PATCH
	codes      map[int]int     // the other responses, by status code
	outside    int             // PATCHes received after the window (none expected)
	sent       []time.Time     // the agents' PATCHes on nodes sent in the window (client side)
	sentEarly  int             // and sent between the restart and the window (held in connects)
	held429    []time.Duration // per 429 in the window: arrival → answer (priority and fairness's queue)
	others     map[string]int
}

// second is one second of the recovery window: PATCHes received, how many of them got no 2xx, and
// those by status code.
type second struct {
	total, failed int
	codes         map[int]int
	slowest       time.Duration // longest time from arrival to response
}

// analyse reads the audit log. It counts the ResponseComplete (or Panic) record of each request:
// the harness's audit policy omits RequestReceived, and ResponseComplete is the one record every
// PATCH gets, carrying both its arrival time and its status code. Requests are placed by arrival
// (requestReceivedTimestamp), which is what the agents send, not by when the server got through
// them. Only the agents' ServiceAccount user is read (the admin's and the tracker's requests are
// another user's), and only verb patch on resource nodes: Events are excluded, and the agents
// LIST/WATCH through reflectors whose retries are jittered already.
//
// The window starts when the API server is ready (or at the first PATCH, if one arrived earlier:
// the server listens before /readyz passes) and ends when the last agent's write completed (its
// last 2xx PATCH).
func (r *outageReport) analyse(t *testing.T, cp *harness.ControlPlane) error {
	t.Helper()
	evs, err := cp.AuditSince(harness.AgentUser, r.stopped)
	if err != nil {
		return err
	}
	var patches []harness.TimedAuditEvent
	for _, e := range evs {
		done := e.Stage == "ResponseComplete" || e.Stage == "Panic"
		if done && e.Verb == "patch" && e.ObjectRef != nil && e.ObjectRef.Resource == "nodes" {
			patches = append(patches, e)
		}
	}
	slices.SortFunc(patches, func(a, b harness.TimedAuditEvent) int { return a.RequestReceived.Compare(b.RequestReceived) })
	r.start = r.ready
	for _, e := range patches {
		if e.RequestReceived.Before(r.start) {
			r.start = e.RequestReceived
		}
		if success(e) && e.StageTimestamp.After(r.end) {
			r.end = e.StageTimestamp
		}
	}
	if r.end.IsZero() {
		return fmt.Errorf("no successful agent PATCH on nodes in the audit log after the restart (%d attempts)", len(patches))
	}
	r.codes = map[int]int{}
	written := map[string]time.Time{}
	r.series = make([]second, windowSeconds(r.start, r.end))
	for _, e := range patches {
		if e.RequestReceived.After(r.end) {
			r.outside++
			continue
		}
		r.received = append(r.received, e.RequestReceived)
		s := &r.series[int(e.RequestReceived.Sub(r.start)/time.Second)]
		s.total++
		s.slowest = max(s.slowest, e.StageTimestamp.Sub(e.RequestReceived))
		if success(e) {
			r.ok++
			written[e.ObjectRef.Name] = e.StageTimestamp
		} else {
			s.failed++
			r.codes[code(e)]++
			if code(e) == http.StatusTooManyRequests {
				r.held429 = append(r.held429, e.StageTimestamp.Sub(e.RequestReceived))
			}
			if s.codes == nil {
				s.codes = map[int]int{}
			}
			s.codes[code(e)]++
		}
	}
	if len(written) != r.nodes {
		return fmt.Errorf("the audit log shows a successful agent write for %d of %d Nodes", len(written), r.nodes)
	}
	for _, at := range written {
		r.writes = append(r.writes, at.Sub(r.ready))
	}
	r.others = countRequests(t, cp, r.start, r.end.Add(time.Nanosecond))
	r.sent = patchesSent.between(r.start, r.end)
	r.sentEarly = len(patchesSent.between(r.restarted, r.start.Add(-time.Nanosecond)))
	return nil
}

// windowSeconds is the number of whole one-second buckets that cover [start, end] (at least one).
func windowSeconds(start, end time.Time) int {
	return int(end.Sub(start)/time.Second) + 1
}

func success(e harness.TimedAuditEvent) bool {
	return e.ResponseStatus != nil && e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code <= 299
}

func code(e harness.TimedAuditEvent) int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// mean is the PATCH rate over the window, per one-second bucket (the unit of the peak; the last,
// partial second counts whole, which lowers the mean slightly and never flatters the ratio).
func (r *outageReport) mean() float64 {
	return float64(len(r.received)) / float64(len(r.series))
}

// peak is the largest number of PATCHes received within any one second (a sliding window, so a
// burst that straddles two buckets of the series is not split).
func (r *outageReport) peak() int { return peakPerSecond(r.received) }

// sentPeak2Mean is peak/mean of the PATCHes as the agents sent them, over the same window: the
// spread the agents' retry schedule achieved, before the server's own queueing or stalls.
func (r *outageReport) sentPeak2Mean() float64 {
	if len(r.sent) == 0 {
		return 0
	}
	return float64(peakPerSecond(r.sent)) / (float64(len(r.sent)) / float64(len(r.series)))
}

// silentSends is the number of seconds of the window in which the server received no PATCH, and
// how many the agents sent in those seconds.
func (r *outageReport) silentSends() (seconds, sent int) {
	perSent := perSecond(r.sent, r.start, len(r.series))
	for i, s := range r.series {
		if s.total == 0 {
			seconds++
			sent += perSent[i]
		}
	}
	return seconds, sent
}

// loadAvg is the machine's load average (1, 5, 15 min) as uptime prints it.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func (r *outageReport) write(t *testing.T) {
	t.Helper()
	for i, s := range r.series {
		if s.total > 0 {
			t.Logf("second %d of the window: %d PATCHes, slowest answered in %s, non-2xx: %d%s",
				i, s.total, secs(s.slowest), s.failed, codeList(s.codes))
		}
	}
	var b strings.Builder
	r.writeMethod(&b)
	r.writeTable(&b)
	r.writeSeries(&b)
	r.writeConclusion(&b)
	out := b.String()
	fmt.Print("\n" + out)
	if f := os.Getenv("NODEADDR_BENCH_OUT"); f != "" {
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Errorf("write %s: %v", f, err)
		}
	}
}

func (r *outageReport) writeMethod(b *strings.Builder) {
	fmt.Fprintf(b, "### Outage: %d agents, kube-apiserver down %s\n\n", r.nodes, secs(r.restarted.Sub(r.stopped)))
	fmt.Fprintf(b, "The fleet of the scale benchmark (%d in-process agents built as that benchmark builds them, own token, client and connection each, "+
		"QPS %d burst %d, publish rate %d/s burst %d, ExternalIP managed, taint removal on, one kube-apiserver %s "+
		"with etcd, the DaemonSet's admission policy, audit log at Metadata level, %s). Once every Node shows its address and has lost its taint, "+
		"kube-apiserver is stopped (etcd keeps running), every agent is handed a new address (a write pending "+
		"on every agent), the server stays down %s from its exit and is started again on the same etcd. "+
		"Counted from the audit log: the agents' PATCH requests on nodes (user `%s`, any subresource; not "+
		"Events, not the admin's requests), one per ResponseComplete record, placed by arrival time. Recovery "+
		"window: from kube-apiserver ready (or the first PATCH, if earlier) to the completion of the last "+
		"agent's successful write. Mean: PATCHes / whole seconds of the window; peak: most PATCHes received "+
		"within any one second. Machine: %d CPUs (%s), shared with other work; load average %s before, %s after.\n\n",
		r.nodes, clientQPS, clientBurst, publishRate, publishBurst, harness.KubernetesVersion, r.apfMode(),
		secs(r.restarted.Sub(r.stopped)), harness.AgentUser, runtime.NumCPU(), cpuModel(), r.loadBefore, r.loadAfter)
}

func (r *outageReport) writeTable(b *strings.Builder) {
	failed := len(r.received) - r.ok
	b.WriteString("| measure | result |\n| --- | --- |\n")
	row := func(k, format string, args ...any) { fmt.Fprintf(b, "| %s | %s |\n", k, fmt.Sprintf(format, args...)) }
	row("write attempts refused while the server was down (agents' count)", "%d (%.1f per agent)",
		r.failedDuringOutage, float64(r.failedDuringOutage)/float64(r.nodes))
	row("kube-apiserver restart → ready", "%s", secs(r.ready.Sub(r.restarted)))
	row("recovery time: ready → last agent's write completed", "%s", secs(r.end.Sub(r.ready)))
	row("ready → each agent's write completed", "%s; Nodes written: %d of %d", dist(r.writes), len(r.writes), r.nodes)
	if r.start.Before(r.ready) {
		row("first agent PATCH before ready", "%s before", secs(r.ready.Sub(r.start)))
	}
	row("agent PATCHes on nodes in the window", "%d: %d 2xx (Node writes, for %d nodes), %d non-2xx%s",
		len(r.received), r.ok, r.nodes, failed, codeList(r.codes))
	if len(r.held429) > 0 {
		row("429s: time in the server, arrival → answer (priority and fairness's queue)", "%s", dist(r.held429))
	}
	row("mean PATCH rate over the window", "%.1f/s (%d PATCHes over %d s)", r.mean(), len(r.received), len(r.series))
	row("peak one-second PATCH rate", "%d/s (%.0f%% of the fleet's writes)", r.peak(), 100*float64(r.peak())/float64(max(r.ok, 1)))
	row("peak / mean", "%.2f (goal ≤ %.0f)", r.peak2mean(), spreadGoal)
	row("the same PATCHes as the agents sent them (client side): count, peak/s, peak / mean", "%d, %d/s, %.2f",
		len(r.sent), peakPerSecond(r.sent), r.sentPeak2Mean())
	row("PATCHes the agents sent after the restart but before the window (waiting in connects or TLS handshakes)", "%d", r.sentEarly)
	silent, sentThen := r.silentSends()
	row("seconds of the window in which the server received no PATCH; PATCHes the agents sent in them", "%d; %d", silent, sentThen)
	row("agents' write conflicts / write errors / overwrites detected, stop → converged", "%s", r.obs)
	row("all agent requests in the window (context)", "%s", byVerb(r.others))
	if r.outside > 0 {
		row("agent PATCHes after the window", "%d", r.outside)
	}
	b.WriteString("\n")
}

func (r *outageReport) peak2mean() float64 {
	if r.mean() == 0 {
		return 0
	}
	return float64(r.peak()) / r.mean()
}

func codeList(codes map[int]int) string {
	if len(codes) == 0 {
		return ""
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(codes)) {
		parts = append(parts, fmt.Sprintf("%d: %d", c, codes[c]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// writeSeries prints PATCHes per second of the window, ten seconds a row: received ("n (f)": n
// PATCHes received in that second, f of them answered with no 2xx), then sent by the agents.
func (r *outageReport) writeSeries(b *strings.Builder) {
	fmt.Fprintf(b, "PATCHes received per second of the recovery window (second 0 starts %s; \"n (f)\": f of the n got no 2xx):\n\n",
		r.windowStartText())
	writeGrid(b, len(r.series), func(i int) string {
		if r.series[i].failed > 0 {
			return fmt.Sprintf("%d (%d)", r.series[i].total, r.series[i].failed)
		}
		return fmt.Sprint(r.series[i].total)
	})
	fmt.Fprintf(b, "The same window's PATCHes per second as the agents sent them (client side, retries included):\n\n")
	sent := perSecond(r.sent, r.start, len(r.series))
	writeGrid(b, len(sent), func(i int) string { return fmt.Sprint(sent[i]) })
}

// writeGrid prints n cells as a markdown table of ten seconds a row.
func writeGrid(b *strings.Builder, n int, cell func(int) string) {
	b.WriteString("| s | +0 | +1 | +2 | +3 | +4 | +5 | +6 | +7 | +8 | +9 |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for row := 0; row < n; row += 10 {
		fmt.Fprintf(b, "| %d |", row)
		for i := row; i < row+10; i++ {
			if i >= n {
				b.WriteString(" |")
				continue
			}
			fmt.Fprintf(b, " %s |", cell(i))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

func (r *outageReport) windowStartText() string {
	if r.start.Before(r.ready) {
		return fmt.Sprintf("at the first PATCH, %s before ready", secs(r.ready.Sub(r.start)))
	}
	return "when kube-apiserver was ready"
}

func (r *outageReport) writeConclusion(b *strings.Builder) {
	verdict := "met"
	if r.peak2mean() > spreadGoal {
		verdict = "not met"
	}
	fmt.Fprintf(b, "Peak %d/s against a mean of %.1f/s over %d s: peak/mean %.2f, the goal (≤ %.0f) is %s.\n",
		r.peak(), r.mean(), len(r.series), r.peak2mean(), spreadGoal, verdict)
}

func (r *outageReport) apfMode() string {
	if r.flowSchema {
		return "priority and fairness on with deploy/flowcontrol.yaml's FlowSchema and priority level `nodeaddr` applied"
	}
	if r.apf {
		return "priority and fairness on with v1.37.2's default FlowSchemas and priority levels"
	}
	return "priority and fairness off, so more than 200 concurrent writes get 429"
}
