//go:build bench

// Package bench measures nodeaddr on the end-to-end harness and writes docs/BENCHMARKS.md
// (`make bench`). It is a benchmark, not a test: it asserts nothing about speed, it reports.
package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

type env struct {
	*harness.Host
	t    *testing.T
	cp   *harness.ControlPlane
	node string
	ns   *harness.Netns
}

// newEnv is a Host with one uplink (192.0.2.10/24, default via 192.0.2.1).
func newEnv(t *testing.T, node string) *env {
	h := harness.NewHost(t, node)
	h.Uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	return &env{Host: h, t: t, cp: h.CP, node: node, ns: h.NS}
}

func (e *env) start(args ...string) *harness.Agent {
	return e.Start(append([]string{"--internal-ip-target=none", "--external-ip-target=8.8.8.8"}, args...)...)
}

// nodeWatch reports the time each new address list of the Node was seen by a client-go watch.
type seen struct {
	at    time.Time
	addrs string
	taint bool
}

func (e *env) watch(ctx context.Context) <-chan seen {
	out := make(chan seen, 1024)
	w, err := e.cp.Admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", e.node).String()})
	if err != nil {
		e.t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			out <- seen{at: time.Now(), addrs: addrs(n), taint: hasUninit(n)}
		}
	}()
	return out
}

func addrs(n *corev1.Node) string {
	var s []string
	for _, a := range n.Status.Addresses {
		s = append(s, string(a.Type)+"="+a.Address)
	}
	return strings.Join(s, ",")
}

func hasUninit(n *corev1.Node) bool { return harness.HasTaint(n, harness.Uninitialized.Key) }

func waitFor(t *testing.T, ch <-chan seen, timeout time.Duration, cond func(seen) bool) seen {
	t.Helper()
	// A watch, not a poll: the time each Node version was seen is the measurement.
	tm := time.After(timeout)
	var last *seen
	for {
		select {
		case s := <-ch:
			if cond(s) {
				return s
			}
			last = &s
		case <-tm:
			t.Fatalf("condition not seen within %s; last seen %+v", timeout, last)
		}
	}
}

type quantiles struct {
	n                  int
	p50, p95, p99, max time.Duration
}

func q(ds []time.Duration) quantiles {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return quantiles{len(s), at(0.50), at(0.95), at(0.99), s[len(s)-1]}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }

var report strings.Builder

func section(format string, args ...any) {
	fmt.Fprintf(&report, format, args...)
	fmt.Printf(format, args...)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// 1. Reaction latency: kernel change (the `ip` command returned) → a watch sees the Node change.
func reactionLatency(t *testing.T, label string, samples int, args ...string) quantiles {
	e := newEnv(t, "latency")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := e.watch(ctx)
	e.start(args...)
	waitFor(t, ch, 30*time.Second, func(s seen) bool { return s.addrs == "ExternalIP=192.0.2.10" })
	var ds []time.Duration
	cur, next := "192.0.2.10", "192.0.2.11"
	for i := 0; i < samples; i++ {
		// Random phase against the resync ticker and the rate limiter (1 write/s sustained).
		time.Sleep(time.Duration(1000+rand.IntN(400)) * time.Millisecond) // kernel interval: 1-1.4 s between renumberings
		e.ns.IP("addr", "add", next+"/24", "dev", "eth0")
		e.ns.IP("addr", "del", cur+"/24", "dev", "eth0")
		t0 := time.Now()
		want := "ExternalIP=" + next
		s := waitFor(t, ch, 30*time.Second, func(s seen) bool { return s.addrs == want })
		ds = append(ds, s.at.Sub(t0))
		cur, next = next, cur
	}
	r := q(ds)
	t.Logf("%s: %+v", label, r)
	return r
}

func startToTaintRemoved(t *testing.T, samples int) quantiles {
	e := newEnv(t, "startup")
	var ds []time.Duration
	for i := 0; i < samples; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized}})
		ch := e.watch(ctx)
		t0 := time.Now()
		a := e.start()
		s := waitFor(t, ch, 30*time.Second, func(s seen) bool { return !s.taint && s.addrs != "" })
		ds = append(ds, s.at.Sub(t0))
		a.Stop()
		cancel()
		if err := e.cp.Admin.CoreV1().Nodes().Delete(context.Background(), e.node, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // measured window: the Node gone before the next sample
	}
	return q(ds)
}

func verbs(t *testing.T, cp *harness.ControlPlane, user string) map[string]int {
	evs, err := cp.Audit(user)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, e := range evs {
		m[e.Verb]++
	}
	return m
}

func diff(a, b map[string]int) map[string]int {
	m := map[string]int{}
	for k, v := range b {
		if d := v - a[k]; d != 0 {
			m[k] = d
		}
	}
	return m
}

// procStatus returns the numeric fields of /proc/pid/status (kB for sizes).
func procStatus(t *testing.T, pid int) map[string]int {
	m := map[string]int{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if f := strings.Fields(v); ok && len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				m[k] = n
			}
		}
	}
	return m
}

func cpuSeconds(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// runs reports whether a section is selected by $NODEADDR_BENCH_ONLY, a comma-separated list of
// latency, api, flap, churn, footprint (empty: every section).
// ruleRow names the policy-rule reaction in the latency table (ruleReaction).
const ruleRow = "`ip rule add`/`del` moving the target's route (default)"

// targetP50 and targetP99 are the reaction target at the default settings, for an address change
// and a rule change alike; the latency section says whether each row meets it.
const targetP50, targetP99 = 25 * time.Millisecond, 50 * time.Millisecond

// verdict says whether q meets the reaction target, in the page's words.
func verdict(q quantiles) string {
	if q.p50 <= targetP50 && q.p99 <= targetP99 {
		return "met"
	}
	return "**missed**"
}

func runs(name string) bool {
	only := os.Getenv("NODEADDR_BENCH_ONLY")
	return only == "" || slices.Contains(strings.Split(only, ","), name)
}

func TestReport(t *testing.T) {
	if only := os.Getenv("NODEADDR_BENCH_ONLY"); only != "" {
		for _, n := range strings.Split(only, ",") {
			if !slices.Contains([]string{"latency", "rule", "api", "flap", "churn", "footprint"}, n) {
				t.Fatalf("NODEADDR_BENCH_ONLY: unknown section %q (latency, rule, api, flap, churn, footprint)", n)
			}
		}
	}
	samples := envInt("NODEADDR_BENCH_SAMPLES", 200)
	idle := time.Duration(envInt("NODEADDR_BENCH_IDLE_SECONDS", 300)) * time.Second
	commit, _ := exec.Command("git", "-C", harness.RepoDir(), "rev-parse", "--short", "HEAD").Output()
	kernel, _ := exec.Command("uname", "-r").Output()
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				_, cpu, _ = strings.Cut(l, ": ")
				break
			}
		}
	}
	date := time.Now().UTC().Format("2006-01-02 15:04 UTC")
	section("# nodeaddr benchmarks\n\nGenerated by `make bench` (test/bench, build tag `bench`) on %s. Every table is from this run unless it names its own commit and date; how each result came about, and the earlier runs, are in [bench/](bench/README.md).\n\n",
		date)
	// stamp dates a section of a partial run (NODEADDR_BENCH_ONLY), whose tables are pasted into
	// docs/BENCHMARKS.md beside those of another run; a full run's header dates them all.
	stamp := ""
	if os.Getenv("NODEADDR_BENCH_ONLY") != "" {
		stamp = fmt.Sprintf(" Measured %s, commit %s (`NODEADDR_BENCH_ONLY=%s`).", date, strings.TrimSpace(string(commit)), os.Getenv("NODEADDR_BENCH_ONLY"))
	}
	section("| | |\n|---|---|\n| commit | %s |\n| machine | %d × %s, kernel %s |\n| Go | %s |\n| Kubernetes | kube-apiserver %s + embedded etcd on loopback |\n| agent | the real binary in a network namespace, uid 65532, no capabilities |\n\n",
		strings.TrimSpace(string(commit)), runtime.NumCPU(), cpu, strings.TrimSpace(string(kernel)), runtime.Version(), harness.KubernetesVersion)

	// 1. Reaction latency.
	if runs("latency") {
		def := reactionLatency(t, "default", samples)
		old := reactionLatency(t, "fixed-100ms", samples, "--debounce=100ms", "--link-debounce=100ms")
		zero := reactionLatency(t, "debounce=0", samples, "--debounce=0", "--link-debounce=0")
		rule := ruleReaction(t, samples)
		start := startToTaintRemoved(t, 10)
		section("## 1. Reaction latency\n\nTime from the `ip addr del` that renumbers the uplink returning to a client-go watch seeing the Node's new ExternalIP; %d changes per setting at random phase (1.0–1.4 s apart, so the default 1 write/s limiter is not the bottleneck). Target at the default, for an address change and for a rule change: p50 ≤ %d ms and p99 ≤ %d ms.%s\n\n",
			samples, targetP50.Milliseconds(), targetP99.Milliseconds(), stamp)
		section("| setting | n | p50 | p95 | p99 | max |\n|---|---|---|---|---|---|\n")
		for _, r := range []struct {
			name string
			q    quantiles
		}{{"default (`--debounce=10ms`, `--link-debounce=100ms`)", def}, {"`--debounce=100ms --link-debounce=100ms` (the old default)", old},
			{"`--debounce=0 --link-debounce=0`", zero}, {ruleRow, rule}, {"process start → taint removed", start}} {
			section("| %s | %d | %s | %s | %s | %s |\n", r.name, r.q.n, ms(r.q.p50), ms(r.q.p95), ms(r.q.p99), ms(r.q.max))
		}
		section("\nAgainst the target: the default, p50 %s and p99 %s: %s; the `ip rule` row, p50 %s and p99 %s: %s.\n",
			ms(def.p50), ms(def.p99), verdict(def), ms(rule.p50), ms(rule.p99), verdict(rule))
		section("\nlocal-ccm polls every 10 s: its reaction is uniformly 0–10 s (p50 5 s, p99 9.9 s).\n\n")
	}

	// The policy-rule row alone (NODEADDR_BENCH_ONLY=rule; the latency section includes it).
	if runs("rule") && !runs("latency") {
		r := ruleReaction(t, samples)
		section("Target: p50 ≤ %d ms and p99 ≤ %d ms.%s\n\n| setting | n | p50 | p95 | p99 | max |\n|---|---|---|---|---|---|\n| %s | %d | %s | %s | %s | %s |\n\nAgainst the target: %s.\n\n",
			targetP50.Milliseconds(), targetP99.Milliseconds(), stamp, ruleRow, r.n, ms(r.p50), ms(r.p95), ms(r.p99), ms(r.max), verdict(r))
	}

	// 2. API cost while idle, beside a 10 s polling agent.
	if runs("api") {
		e := newEnv(t, "cost")
		e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized}})
		e.cp.CreateNode(t, harness.NodeSpec{Name: "polled"})
		e.start()
		e.cp.WaitNode(t, e.node, 30*time.Second, "initialized", func(n *corev1.Node) bool { return !hasUninit(n) })
		window := 120 * time.Second
		a0, p0 := verbs(t, e.cp, harness.AgentUser), verbs(t, e.cp, "admin")
		ctx, cancel := context.WithTimeout(context.Background(), window)
		go poller(ctx, e.cp, "polled")
		<-ctx.Done()
		cancel()
		time.Sleep(200 * time.Millisecond) // measured window: the poller's last requests land before counting
		a1, p1 := verbs(t, e.cp, harness.AgentUser), verbs(t, e.cp, "admin")
		agent, poll := diff(a0, a1), diff(p0, p1)
		perHour := func(m map[string]int, v string) string {
			return fmt.Sprintf("%.0f", float64(m[v])*float64(time.Hour)/float64(window))
		}
		section("## 2. API cost while idle\n\nRequests per node-hour by verb from the API server's audit log over %s of idling (default `--resync-interval=60s`), beside a 10 s polling loop doing GET + GET + PATCH per loop as local-ccm does, in the same run. The agent's one long-running WATCH is opened before the window.\n\n", window)
		section("| verb | nodeaddr | 10 s poller |\n|---|---|---|\n")
		for _, v := range []string{"get", "list", "watch", "patch", "update"} {
			section("| %s | %s | %s |\n", v, perHour(agent, v), perHour(poll, v))
		}
		section("\n")
	}

	// 3. Flap storm.
	if runs("flap") {
		e := newEnv(t, "storm")
		e.cp.CreateNode(t, harness.NodeSpec{Name: e.node})
		a := e.start()
		e.cp.WaitNode(t, e.node, 30*time.Second, "published", func(n *corev1.Node) bool { return addrs(n) == "ExternalIP=192.0.2.10" })
		w0 := e.cp.Writes(t, e.node)["status"]
		lines := harness.FlapBatch(1000, "eth0", "192.0.2.10/24", "192.0.2.11/24")
		t0 := time.Now()
		e.ns.Batch(lines)
		took := time.Since(t0)
		n := e.cp.WaitNode(t, e.node, 30*time.Second, "final", func(n *corev1.Node) bool { return addrs(n) == "ExternalIP=192.0.2.11" })
		time.Sleep(7 * time.Second) // measured window: the storm's writes counted after it settles
		w := e.cp.Writes(t, e.node)["status"] - w0
		m, _ := a.Metrics()
		section("## 3. Flap storm\n\n1 000 renumbering cycles (4 000 address operations, `ip -batch`, %s) ending on a new address. Target: ≤ 3 writes with default settings.\n\n", took.Round(time.Millisecond))
		section("| writes | final state | address events seen | resolutions |\n|---|---|---|---|\n| %d | %s (%s) | %.0f | %.0f |\n\n",
			w, addrs(n), map[bool]string{true: "exact", false: "WRONG"}[addrs(e.cp.Node(t, e.node)) == "ExternalIP=192.0.2.11"],
			m[`nodeaddr_netlink_events_total{kind="address"}`], m[`nodeaddr_resolutions_total{result="success"}`])
	}

	// 4. Kernel churn.
	if runs("churn") {
		e := newEnv(t, "churn")
		e.cp.CreateNode(t, harness.NodeSpec{Name: e.node})
		a := e.start()
		e.cp.WaitNode(t, e.node, 30*time.Second, "published", func(n *corev1.Node) bool { return addrs(n) == "ExternalIP=192.0.2.10" })
		w0 := e.cp.Writes(t, e.node)["status"]
		c0 := cpuSeconds(t, a.Pid())
		add, del := harness.RouteBatch(50000, "192.0.2.1", "eth0")
		t0 := time.Now()
		e.ns.Batch(add)
		e.ns.Batch(del)
		took := time.Since(t0)
		time.Sleep(3 * time.Second) // measured window: the writes counted after it settles
		cpuUsed := cpuSeconds(t, a.Pid()) - c0
		st := procStatus(t, a.Pid())
		m, _ := a.Metrics()
		ok := addrs(e.cp.Node(t, e.node)) == "ExternalIP=192.0.2.10" && e.cp.Writes(t, e.node)["status"] == w0
		section("## 4. Kernel churn\n\n100 000 route events (50 000 additions then removals in the main table, `ip -batch`, %s), default 4 MiB receive buffer request (capped by `net.core.rmem_max`).\n\n", took.Round(time.Millisecond))
		section("| agent CPU | peak RSS (VmHWM) | route events counted | resubscriptions | Node afterwards |\n|---|---|---|---|---|\n| %.2f s | %.1f MiB | %.0f | %.0f | %s |\n\n",
			cpuUsed, float64(st["VmHWM"])/1024, m[`nodeaddr_netlink_events_total{kind="route"}`],
			m[`nodeaddr_netlink_resubscriptions_total{subscription="route"}`], map[bool]string{true: "exact, no write", false: "WRONG"}[ok])
	}

	// 5. Footprint.
	if runs("footprint") {
		// Stripped size first, so it is the size of the code that then idles (and a build does not
		// compete with the idle agent).
		bin := filepath.Join(t.TempDir(), "nodeaddr")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/nodeaddr")
		cmd.Dir, cmd.Env = harness.RepoDir(), append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build: %v %s", err, out)
		}
		fi, _ := os.Stat(bin)
		e := newEnv(t, "idle")
		e.cp.CreateNode(t, harness.NodeSpec{Name: e.node})
		a := e.start()
		e.cp.WaitNode(t, e.node, 30*time.Second, "published", func(n *corev1.Node) bool { return addrs(n) != "" })
		time.Sleep(5 * time.Second) // measured window: the agent settles before its idle cost is measured
		c0 := cpuSeconds(t, a.Pid())
		w := watchWakeups(a.Pid(), idle)
		s1, c1 := procStatus(t, a.Pid()), cpuSeconds(t, a.Pid())
		perMin := func(n int) float64 { return float64(n) / w.took.Minutes() }
		section("## 5. Footprint\n\nThe agent idling for %s after publishing (default settings; nothing scrapes or probes it). Targets: RSS ≤ 28 MiB, anonymous ≤ 5 MiB, no wakeups besides the resync, binary ≤ 32 MB. Anchor: a 10 s polling agent measures 32 MB RSS and 5.2 MB anonymous on this kind of harness.\n\n", idle)
		section("| RSS | RssAnon | RssFile | CPU while idle | wake events while idle | context switches (all threads) | stripped binary |\n|---|---|---|---|---|---|---|\n| %.1f MiB | %.1f MiB | %.1f MiB | %.2f s | %d (%.2f/min) | %d (%.0f/min) | %.1f MB |\n\n",
			float64(s1["VmRSS"])/1024, float64(s1["RssAnon"])/1024, float64(s1["RssFile"])/1024, c1-c0,
			w.events, perMin(w.events), w.switches, perMin(w.switches), float64(fi.Size())/1e6)
		// What wakes the idle agent, source by source (TestWakeups), is in docs/bench/notes.md.
		section("What wakes the idle agent, source by source: [bench/notes.md](bench/notes.md#what-wakes-the-idle-agent).\n\n")
	}

	if out := os.Getenv("NODEADDR_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// poller does what a 10 s polling agent does: GET the Node twice and PATCH its addresses.
func poller(ctx context.Context, cp *harness.ControlPlane, node string) {
	nodes := cp.Admin.CoreV1().Nodes()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		nodes.Get(context.Background(), node, metav1.GetOptions{})
		nodes.Get(context.Background(), node, metav1.GetOptions{})
		nodes.Patch(context.Background(), node, types.MergePatchType,
			[]byte(`{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`), metav1.PatchOptions{}, "status")
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
