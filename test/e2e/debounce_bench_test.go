//go:build bench

package e2e

// The debounce table (`make bench-debounce`, build tag bench): the real agent at fixed debounces
// (--debounce and --link-debounce equal: 100ms, the old default, 25ms and 10ms) and at the default
// (10ms after address, route and rule events, 100ms after link events) on the scripted real-kernel scenarios of this package's tests,
// each repeated, counting the agent's Node writes (the API server's audit log, as the tests do),
// the address lists a client-go watch saw that are neither the state before a run nor its final
// state, and the reaction (last kernel change → the watch sees the final addresses). It reports and
// asserts nothing about timings.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// debounceSetting is one column of the comparison: its name in the table and the agent's flags.
type debounceSetting struct {
	name string
	args []string
}

// debounceSettings are the settings compared; the last is the default.
var debounceSettings = []debounceSetting{
	{"100ms fixed (the old default)", []string{"--debounce=100ms", "--link-debounce=100ms"}},
	{"25ms fixed", []string{"--debounce=25ms", "--link-debounce=25ms"}},
	{"10ms fixed", []string{"--debounce=10ms", "--link-debounce=10ms"}},
	{"10ms, link events 100ms (the default)", nil},
}

// debounceScenario is one row group of the table: setup builds the world on e (the agent started
// with e.args, which carry --debounce) and returns run, which makes run k's kernel change. run
// returns the Node's address list (format) the change ends in and when the last kernel change was
// made (the return of the last command, or for the route flood the thaw of the agent right after
// the renumbering; zero when the Node must not change). With a kernel monitor (a daemon makes the
// change) the reaction is measured from the kernel's last event, and a non-zero time returned is
// the cause the daemon acted on (radvd's reload with the announcement), reported beside it.
type debounceScenario struct {
	key, name string
	// settle is how long a run waits, after the final state was seen (or after the change when the
	// Node must not change), for a late write or an intermediate state before the next run.
	settle time.Duration
	// monitor: the reaction is measured from the last event of `ip monitor` in the node namespace
	// before the final state was seen (the change is made by a daemon, not by the script).
	monitor bool
	setup   func(e *env) (run func(k int) (final string, last time.Time))
}

// debounceScenarios are the e2e tests' scenarios, through their own helpers.
func debounceScenarios(dnsmasq, dhclient, keepalived string) []debounceScenario {
	renumbered := func(e *env, ip string) string {
		return harness.FormatAddrs([]corev1.NodeAddress{harness.Addr(ext, ip), harness.Addr(hn, e.node)})
	}
	ipN := func(n int) string { return "192.0.2." + itoa(n) }
	return []debounceScenario{{
		key: "dhcp", name: "DHCP renewal, new lease (dnsmasq, dhclient)", settle: 2 * time.Second, monitor: true,
		setup: func(e *env) func(int) (string, time.Time) {
			d := e.startDHCP(dnsmasq, dhclient)
			return func(k int) (string, time.Time) {
				d.renew(ipN(51 + k)) // the first lease is 192.0.2.50
				return renumbered(e, ipN(51+k)), time.Time{}
			}
		},
	}, {
		key: "vrrp", name: "VRRP failover (keepalived), the Node unchanged", settle: 2 * time.Second,
		setup: func(e *env) func(int) (string, time.Time) {
			v := e.startVRRP(keepalived)
			return func(k int) (string, time.Time) {
				if k%2 == 0 {
					v.failover()
				} else {
					v.failback()
				}
				return "[ExternalIP=192.0.2.10]", time.Time{}
			}
		},
	}, {
		key: "carrier", name: "carrier flap storm (50 flaps in 5 s), the Node unchanged", settle: 7 * time.Second,
		setup: func(e *env) func(int) (string, time.Time) {
			e.startCarrierFlap()
			return func(int) (string, time.Time) {
				e.flapCarrier()
				return "[ExternalIP=192.0.2.10]", time.Time{}
			}
		},
	}, {
		// The soak's carrier storm (test/soak flapStorm): a second uplink takes the default route
		// whenever the first loses its carrier, so every flap is a different route source.
		key: "failover-flap", name: "carrier flap storm on the preferred of two uplinks (50 flaps, 30 ms down, 30 ms up), the route moving each time", settle: 7 * time.Second,
		setup: func(e *env) func(int) (string, time.Time) {
			e.startCarrierFlap()
			e.uplink("eth1", "198.51.100.10/24", "198.51.100.1", 200)
			e.ns.Sysctl("net.ipv4.conf.eth1.ignore_routes_with_linkdown", "1")
			return func(int) (string, time.Time) {
				for range 50 {
					e.router.IP("link", "set", "r-eth0", "down")
					time.Sleep(30 * time.Millisecond) // kernel interval: the carrier down 30 ms
					e.router.IP("link", "set", "r-eth0", "up")
					time.Sleep(30 * time.Millisecond) // kernel interval: and up 30 ms
				}
				return "[ExternalIP=192.0.2.10]", time.Now()
			}
		},
	}, {
		key: "storm", name: "address flap storm (1 000 renumbering cycles, `ip -batch`)", settle: 2 * time.Second,
		setup: func(e *env) func(int) (string, time.Time) {
			e.startRenumbering()
			return func(k int) (string, time.Time) {
				e.ns.Batch(harness.FlapBatch(1000, "eth0", ipN(10+k)+"/24", ipN(11+k)+"/24"))
				return renumbered(e, ipN(11+k)), time.Now()
			}
		},
	}, {
		key: "flood", name: "route flood (100 000 routes, agent frozen, renumbered; reaction from the thaw)", settle: 2 * time.Second,
		setup: func(e *env) func(int) (string, time.Time) {
			a := e.startRouteFlood()
			return func(k int) (string, time.Time) {
				// The address change the Node follows is the last before the thaw; the 100 000
				// route deletions after it run while the agent reacts.
				thawed := e.routeFlood(a, ipN(10+k), ipN(11+k))
				return harness.FormatAddrs([]corev1.NodeAddress{harness.Addr(ext, ipN(11+k))}), thawed
			}
		},
	}, {
		key: "mbb", name: "renumbering, make-before-break", settle: 2 * time.Second,
		setup: func(e *env) func(int) (string, time.Time) {
			e.startRenumbering()
			return func(k int) (string, time.Time) {
				e.renumberMakeBeforeBreak(ipN(10+k), ipN(11+k))
				return renumbered(e, ipN(11+k)), time.Now()
			}
		},
	}, {
		key: "bbm", name: "renumbering, break-before-make (1.5 s without an address)", settle: 2 * time.Second,
		setup: func(e *env) func(int) (string, time.Time) {
			e.startRenumbering()
			return func(k int) (string, time.Time) {
				e.renumberBreakBeforeMake(ipN(10+k), ipN(11+k))
				return renumbered(e, ipN(11+k)), time.Now()
			}
		},
	}, {
		// TestRARenumberingMakeBeforeBreak's renumbering, one prefix further each run: radvd
		// announces the next prefix beside the current one, then deprecates the current one
		// (preferred lifetime 0: the Node moves, measured from the kernel's address event), then
		// withdraws it (its address expires within 20 s, deprecated, unpublished).
		key: "ra", name: "IPv6 renumbering by router advertisement, make-before-break (radvd, SLAAC)", settle: 2 * time.Second, monitor: true,
		setup: func(e *env) func(int) (string, time.Time) {
			pfx := func(n int) harness.Prefix6 {
				return harness.Prefix6{Prefix: fmt.Sprintf("2001:db8:%x::/64", n), Preferred: 15, Valid: 20}
			}
			slaac := func(n int) string { return fmt.Sprintf("2001:db8:%x::ff:fe00:10", n) }
			e.raNode(harness.Host6{AddrGenMode: 0})
			r := harness.StartRadvd(e.t, e.router, "r-eth0", harness.RA{Prefixes: []harness.Prefix6{pfx(1)}})
			e.usable6(slaac(1))
			e.start(v6Args...)
			e.waitAddresses(e.internal6(slaac(1)))
			return func(k int) (string, time.Time) {
				cur, next := pfx(1+k), pfx(2+k)
				r.Announce(harness.RA{Prefixes: []harness.Prefix6{cur, next}})
				e.usable6(slaac(2 + k))
				cur.Preferred = 0
				r.Announce(harness.RA{Prefixes: []harness.Prefix6{cur, next}})
				announced := time.Now()
				harness.WaitAddr6(e.t, e.ns, "eth0", "deprecated "+slaac(1+k), func(a harness.Addr6) bool {
					return a.Local == slaac(1+k) && a.Deprecated
				})
				final := harness.FormatAddrs(e.internal6(slaac(2 + k)))
				cur.Valid = 0
				r.Announce(harness.RA{Prefixes: []harness.Prefix6{cur, next}})
				return final, announced
			}
		},
	}}
}

// failback restarts the masters' keepalived: the node takes the service VIP back from the peer and
// router 1 the gateway VIP from router 2 (preemption, a VRRP failover too).
func (v *vrrp) failback() {
	t := v.e.t
	t.Helper()
	v.kn = v.start(v.e.ns, "node", 52, 200, "192.0.2.100")
	v.k1 = v.start(v.e.router, "r1", 51, 200, "192.0.2.1")
	waitVIP(t, v.e.ns, "192.0.2.100", true)
	waitVIP(t, v.peer, "192.0.2.100", false)
	waitVIP(t, v.e.router, "192.0.2.1", true)
	waitVIP(t, v.r2, "192.0.2.1", false)
}

func (l *nodeLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// waitFor returns the first list seen from index from on that equals want.
func (l *nodeLog) waitFor(t *testing.T, from int, timeout time.Duration, want string) nodeSeen {
	t.Helper()
	var found nodeSeen
	harness.Eventually(t, timeout, 5*time.Millisecond, want+" seen", func() (bool, string) {
		seen := l.since(from)
		for _, s := range seen {
			if s.addrs == want {
				found = s
				return true, ""
			}
		}
		l.mu.Lock()
		closed := l.closed
		l.mu.Unlock()
		if closed {
			t.Fatalf("the Node watch closed before %s was seen", want)
		}
		return false, fmt.Sprint(seen)
	})
	return found
}

// kernelClock is `ip monitor` on addresses, routes and links in a namespace: when each kernel
// change was reported to user space.
type kernelClock struct {
	mu     sync.Mutex
	events []time.Time
}

func monitorKernel(t *testing.T, ns *harness.Netns) *kernelClock {
	t.Helper()
	cmd := exec.Command("ip", "-n", ns.Name, "monitor", "address", "route", "link")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	k := &kernelClock{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			at := time.Now()
			k.mu.Lock()
			k.events = append(k.events, at)
			k.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-done; cmd.Wait() })
	return k
}

// lastBefore is the last kernel change reported before at (zero if none after since).
func (k *kernelClock) lastBefore(since, at time.Time) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	var last time.Time
	for _, e := range k.events {
		if e.After(since) && e.Before(at) {
			last = e
		}
	}
	return last
}

// debounceRow is one cell of the table.
type debounceRow struct {
	scenario, debounce string
	runs               int
	writes             []int
	intermediate       map[string]int // intermediateOf's name → runs that published it
	badRuns            int            // runs with an intermediate state
	reactions          []time.Duration
	// fromCause: with a kernel monitor, the reaction from the cause the run returned (radvd's
	// reload with the deprecating announcement) instead of from the kernel's event.
	fromCause []time.Duration
	took      time.Duration
	failed    bool
}

func measureDebounce(t *testing.T, cp *harness.ControlPlane, s debounceScenario, setting int, runs int) *debounceRow {
	row := &debounceRow{scenario: s.name, debounce: debounceSettings[setting].name, intermediate: map[string]int{}}
	start := time.Now()
	node := "db-" + s.key + "-" + strconv.Itoa(setting)
	e := newEnvOn(t, cp, node)
	e.args = slices.Clone(debounceSettings[setting].args)
	run := s.setup(e)
	var clock *kernelClock
	if s.monitor {
		clock = monitorKernel(t, e.ns)
	}
	log := watchNodeLog(t, cp, node)
	before := harness.FormatAddrs(cp.Node(t, node).Status.Addresses)
	writes := func() int { w := cp.Writes(t, node); return w["status"] + w[""] }
	for k := 0; k < runs; k++ {
		i0, w0, t0 := log.len(), writes(), time.Now()
		final, last := run(k)
		if final != before {
			log.waitFor(t, i0, 90*time.Second, final)
		}
		time.Sleep(s.settle) // measured window: the writes a scenario causes are counted after it settles
		row.writes = append(row.writes, writes()-w0)
		states, reached := publishedStates(log.since(i0), before, final)
		if final != before && !reached.IsZero() {
			if s.monitor {
				if !last.IsZero() {
					row.fromCause = append(row.fromCause, reached.Sub(last))
				}
				last = clock.lastBefore(t0, reached)
			}
			if !last.IsZero() {
				row.reactions = append(row.reactions, reached.Sub(last))
			}
		}
		for _, x := range intermediateOf(states, before, final) {
			row.intermediate[x]++
		}
		if len(intermediateOf(states, before, final)) > 0 {
			row.badRuns++
		}
		t.Logf("run %d: %d writes, Node lists %q, reactions so far %v", k, row.writes[k], states, row.reactions)
		if now := harness.FormatAddrs(cp.Node(t, node).Status.Addresses); now != final {
			t.Errorf("run %d: the Node ended with %s, want %s", k, now, final)
		}
		row.runs++
		before = final
	}
	row.took = time.Since(start)
	return row
}

// publishedStates is the sequence of address lists the Node went through in a run (seen, with
// repeats of one list collapsed), starting with before, and when the Node reached final for good
// (zero if it does not end on final).
func publishedStates(seen []nodeSeen, before, final string) (states []string, reached time.Time) {
	states = []string{before}
	for _, s := range seen {
		if s.addrs != states[len(states)-1] {
			states = append(states, s.addrs)
			reached = s.at
		}
	}
	if states[len(states)-1] != final {
		return states, time.Time{}
	}
	return states, reached
}

// intermediateOf names the distinct lists the Node showed between before and final: a list that is
// neither (by itself), or either of them where it does not belong (the old list again, or the final
// list published and then left).
func intermediateOf(states []string, before, final string) []string {
	var out []string
	mid := states[1:] // after before
	if len(mid) > 0 && mid[len(mid)-1] == final {
		mid = mid[:len(mid)-1]
	}
	for _, x := range mid {
		switch x {
		case before:
			x = "the old list again"
		case final:
			x = "the final list published, then left"
		default:
			x = "`" + x + "`"
		}
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func (r *debounceRow) cells() []string {
	if r.failed {
		return []string{r.scenario, r.debounce, strconv.Itoa(r.runs), "FAILED (see the test log)", "", "", ""}
	}
	w := fmt.Sprintf("%d / %d", slices.Min(r.writes), slices.Max(r.writes))
	inter := "none"
	if r.badRuns > 0 {
		var xs []string
		for x, n := range r.intermediate {
			xs = append(xs, fmt.Sprintf("%s (%d)", x, n))
		}
		sort.Strings(xs)
		inter = fmt.Sprintf("**%d of %d runs**: %s", r.badRuns, r.runs, strings.Join(xs, ", "))
	}
	p50, p99 := percentiles(r.reactions)
	if len(r.fromCause) > 0 {
		c50, c99 := percentiles(r.fromCause)
		p50 += " (" + c50 + " from the announcement)"
		p99 += " (" + c99 + ")"
	}
	return []string{r.scenario, r.debounce, strconv.Itoa(r.runs), w, inter, p50, p99}
}

// percentiles formats the p50 and p99 of ds ("—" when empty).
func percentiles(ds []time.Duration) (p50, p99 string) {
	if len(ds) == 0 {
		return "—", "—"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return msSigned(at(0.50)), msSigned(at(0.99))
}

func msSigned(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// settingWanted: NODEADDR_DEBOUNCE_SETTINGS, a comma-separated list of indexes into
// debounceSettings, selects columns (all when unset).
func settingWanted(i int) bool {
	only := os.Getenv("NODEADDR_DEBOUNCE_SETTINGS")
	return only == "" || slices.Contains(strings.Split(only, ","), strconv.Itoa(i))
}

// TestDebounceTable writes the table (markdown) to stdout and to $NODEADDR_BENCH_OUT when set.
// NODEADDR_DEBOUNCE_RUNS sets the runs per cell (default 10); NODEADDR_DEBOUNCE_ONLY, a
// comma-separated list of scenario keys (dhcp, vrrp, carrier, failover-flap, storm, flood, mbb, bbm,
// ra), selects rows.
func TestDebounceTable(t *testing.T) {
	harness.RequireE2E(t)
	runs := 10
	if n, err := strconv.Atoi(os.Getenv("NODEADDR_DEBOUNCE_RUNS")); err == nil && n > 0 {
		runs = n
	}
	// The tools first: a missing one skips the table before a control plane starts.
	scenarios := debounceScenarios(harness.Tool(t, "dnsmasq", "dnsmasq-base"),
		harness.Tool(t, "dhclient", "isc-dhcp-client"), harness.Tool(t, "keepalived", "keepalived"))
	harness.Tool(t, "radvd", "radvd") // the ra row's router (harness.StartRadvd)
	if only := os.Getenv("NODEADDR_DEBOUNCE_ONLY"); only != "" {
		keys := strings.Split(only, ",")
		scenarios = slices.DeleteFunc(scenarios, func(s debounceScenario) bool { return !slices.Contains(keys, s.key) })
		if len(scenarios) != len(keys) {
			t.Fatalf("NODEADDR_DEBOUNCE_ONLY=%s: unknown scenario (dhcp, vrrp, carrier, failover-flap, storm, flood, mbb, bbm, ra)", only)
		}
	}
	commit, _ := exec.Command("git", "-C", harness.RepoDir(), "rev-parse", "--short", "HEAD").Output()
	load0 := loadavg()
	start := time.Now()
	cp := harness.StartControlPlane(t)
	cp.ApplyRBAC(t)

	var rows []*debounceRow
	for _, s := range scenarios {
		for i, d := range debounceSettings {
			if !settingWanted(i) {
				continue
			}
			var row *debounceRow
			ok := t.Run(s.key+"/setting="+strconv.Itoa(i), func(t *testing.T) {
				row = measureDebounce(t, cp, s, i, runs)
				t.Logf("%s %s: %v (%s)", s.key, d.name, row.cells()[3:], row.took.Round(time.Second))
			})
			if row == nil {
				row = &debounceRow{scenario: s.name, debounce: d.name}
			}
			row.failed = row.failed || !ok
			rows = append(rows, row)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s, commit %s, %d × CPU, load average %s at the start and %s at the end; %d runs per cell, %s in all (`make bench-debounce`).\n\n",
		start.UTC().Format("2006-01-02 15:04 UTC"), strings.TrimSpace(string(commit)), runtime.NumCPU(), load0, loadavg(),
		runs, time.Since(start).Round(time.Second))
	b.WriteString("| scenario | debounce | runs | writes per run (min / max) | intermediate states published | reaction p50 | p99 |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r.cells(), " | ") + " |\n")
	}
	fmt.Print("\n" + b.String())
	if out := os.Getenv("NODEADDR_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
