package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// convergeBound is invariant 1's bound: after the last fault of a cycle ends, the Node shows the
// oracle's addresses within this long. The slowest legitimate path: a write that failed during an
// outage waits for the next attempt of the retry schedule (at most 20 s), and a reverted write for
// the overwrite back-off (at most 8 s here), each after the removal grace (5 s).
const convergeBound = 45 * time.Second

// settleHold is how long the Node must stay right, without a write of the agent's, once settled.
const settleHold = 2 * time.Second

// soak is one run: the world, the schedule's random source and the checks' state.
type soak struct {
	t         *testing.T
	seed      uint64
	rng       *rand.Rand
	w         *world
	rec       *recorder
	timeline  *kernelTimeline
	writer    *writer
	audit     *auditTail
	usage     []usage
	dhcp      *dhcp      // the DHCP uplink (TestSoak's only)
	ra        *ra6       // the IPv6 uplink's router (TestSoak's only)
	dhcp6     *dhcp6     // the DHCPv6 uplink (TestSoak's only)
	nft       string     // the nft command (TestSoak's only)
	cg        *cpuCgroup // the agent's CPU cgroup for the pressure fault (TestSoak's only)
	stressDir string     // stress-ng's disk writers' directory (TestSoak's only)

	// added counts the uplinks added after the agent started (the IPv6 ones each change the
	// Node): the start's quiet period allows their writes as faults' (invariant 5).
	added int

	mu      sync.Mutex
	reverts int
	held    int // carrier-down phases of this cycle's storms that may have lasted the link hold
}

func newSoak(t *testing.T, seed uint64) *soak {
	rec := newRecorder(seed)
	s := &soak{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0)), rec: rec, timeline: newKernelTimeline()}
	s.w = newWorld(t, rec)
	s.audit = &auditTail{file: s.w.cp.AuditLog}
	s.writer = &writer{cs: s.w.admin}
	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { s.timeline.run(s.w.ns.Name, 250*time.Millisecond, stop) })
	wg.Go(func() { s.writer.run(ctx) })
	t.Cleanup(func() { cancel(); close(stop); wg.Wait(); closeReader(s.w.ns.Name) })
	s.w.startAgent()
	return s
}

// run runs cycles of overlapping faults until d has passed, each followed by a quiet period in which
// every invariant is checked.
func (s *soak) run(d time.Duration) {
	s.settle("start", time.Now(), s.added)
	// The last cycle's faults and quiet period take up to about 30 s: no cycle starts after that
	// margin, so that a run takes about d in all.
	end := s.rec.start.Add(d - min(30*time.Second, d/4))
	for i := 1; time.Now().Before(end); i++ {
		names := s.faultBurst(i)
		s.settle(fmt.Sprintf("cycle %d (%s)", i, strings.Join(names, ", ")), time.Now(), len(names))
	}
	s.checkUsage(true)
}

// faultBurst starts one to four faults on distinct resources, each after a random delay, waits
// for all of them to end, and heals what they may leave behind. It returns their names.
func (s *soak) faultBurst(cycle int) []string {
	var wg sync.WaitGroup
	used := map[string]bool{}
	var names []string
	for k := range 1 + s.rng.IntN(4) {
		f := pick(s.rng)
		if cycle == 1 && k == 0 && s.cg != nil {
			// Every run starves the node at least once (make test's 3 minutes draw about 20
			// faults): the first cycle's first fault is the pressure fault.
			f = faults[slices.IndexFunc(faults, func(f fault) bool { return f.name == "cpu-io-pressure" })]
		}
		var u uplink
		res := f.resource
		if res == "link" {
			u = uplinks[s.rng.IntN(len(uplinks))]
			res = u.dev
		}
		if used[res] {
			continue
		}
		used[res] = true
		name := f.name
		if f.resource == "link" {
			name += " " + u.dev
		}
		names = append(names, name)
		delay := dur(s.rng, 0, 3*time.Second)
		fr := rand.New(rand.NewPCG(s.seed, uint64(cycle)<<8|uint64(k)))
		wg.Go(func() {
			time.Sleep(delay) // fault window: the faults of a cycle start up to 3 s apart
			s.rec.fault(f.name)
			s.rec.event("fault", "%s starts", name)
			f.run(s, fr, u)
		})
	}
	wg.Wait()
	s.heal()
	return names
}

func pick(r *rand.Rand) fault {
	total := 0
	for _, f := range faults {
		total += f.weight
	}
	x := r.IntN(total)
	for _, f := range faults {
		if x < f.weight {
			return f
		}
		x -= f.weight
	}
	return faults[0]
}

// heal restores what overlapping faults can leave behind (a network manager's job): both links up,
// at least one address per uplink, nothing deprecated, the routes.
func (s *soak) heal() {
	for _, u := range uplinks {
		s.ip("link", "set", u.dev, "up")
		s.w.rtr.TryIP("link", "set", "r-"+u.dev, "up")
		k := readKernel(s.w.ns.Name)
		var mine []kaddr
		for _, a := range k.Addrs {
			if a.Dev == u.dev && a.Family == "inet" && a.Scope == "global" {
				mine = append(mine, a)
			}
		}
		if len(mine) == 0 {
			s.ip("addr", "add", s.freeHost(s.rng, u)+"/24", "dev", u.dev)
		}
		for i, a := range mine {
			if i >= 3 {
				s.ip("addr", "del", a.Local+"/24", "dev", u.dev)
			} else if a.Deprecated || (a.Preferred != nil && *a.Preferred == 0) {
				s.ip("addr", "change", a.Local+"/24", "dev", u.dev, "preferred_lft", "forever")
			}
		}
		s.restoreRoutes(u)
	}
	s.w.relay.heal()
	s.nftHeal()
	s.rec.event("heal", "%s", readKernel(s.w.ns.Name))
}

func (s *soak) restoreRoutes(u uplink) {
	s.ip("route", "replace", "default", "via", u.gw, "dev", u.dev, "metric", fmt.Sprint(u.metric))
	if u.dev == uplinks[1].dev {
		s.ip("route", "replace", "10.200.0.0/16", "via", u.gw, "dev", u.dev, "metric", "50")
	}
}

// settle waits for the Node to match the oracle (invariant 1), holds, and checks the other
// invariants on everything that happened since the last quiet period.
func (s *soak) settle(what string, healed time.Time, nfaults int) {
	var settled time.Time
	err := harness.Poll(max(0, convergeBound-time.Since(healed)), 200*time.Millisecond, what+": the Node converged", func() (bool, string) {
		k := readKernel(s.w.ns.Name)
		n, err := s.w.admin.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		mismatch := s.mismatch(k, n)
		if mismatch == "" {
			settled = time.Now()
		}
		return mismatch == "", mismatch
	})
	if err != nil {
		s.rec.violate(1, "%s: the Node did not converge within %s: %v", what, convergeBound, err)
	}
	if !settled.IsZero() {
		s.rec.converged(settled.Sub(healed), what)
		s.rec.event("settled", "%s in %s", what, settled.Sub(healed).Round(10*time.Millisecond))
		fmt.Printf("soak: +%s %s settled in %s\n", s.rec.since(settled), what,
			settled.Sub(healed).Round(10*time.Millisecond))
	}
	time.Sleep(settleHold) // measured window: the Node must hold still this long after settling
	s.afterSettle(what, settled, nfaults)
}

// afterSettle checks invariants 2 to 7 once the Node settled (settled is zero when it did not).
func (s *soak) afterSettle(what string, settled time.Time, nfaults int) {
	recs, err := s.audit.next()
	if err != nil {
		s.t.Fatalf("audit log: %v", err)
	}
	writes := s.checkWrites(recs)
	s.mu.Lock()
	reverts, held := s.reverts, s.held
	s.reverts, s.held = 0, 0
	s.mu.Unlock()
	s.rec.mu.Lock()
	s.rec.writes += writes
	s.rec.cycles++
	s.rec.mu.Unlock()
	// Invariant 5: at most 2 writes (addresses and taint) plus 3 per fault, 1 per revert and 2 per
	// carrier-down phase that lasted the link hold (a state the agent may publish, and then the
	// state after it) in a cycle, and none at all once the Node is settled.
	bound := 2 + 3*nfaults + reverts + 2*held
	s.rec.event("writes", "%s: %d agent writes (bound %d)", what, writes, bound)
	if writes > bound {
		s.rec.violate(5, "%s: %d agent writes for %d faults, %d reverts and %d carrier-down phases that lasted the link hold (bound %d)",
			what, writes, nfaults, reverts, held, bound)
	}
	if !settled.IsZero() {
		for _, a := range recs {
			if a.User.Username == harness.AgentUser && a.ok() && a.Received.After(settled.Add(100*time.Millisecond)) {
				s.rec.violate(5, "%s: the agent wrote at +%s, after the Node had settled at +%s", what,
					s.rec.since(a.Received), s.rec.since(settled))
			}
		}
		s.checkStill(what)
	}
	s.timeline.prune(time.Now().Add(-3 * time.Minute))
	s.checkUsage(false)
}

// checkStill re-checks invariant 1 after the hold and invariant 3 with the writer paused.
func (s *soak) checkStill(what string) {
	s.writer.lock()
	defer s.writer.unlock()
	n, err := s.w.admin.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		s.rec.violate(0, "%s: read the Node: %v", what, err)
		return
	}
	if m := s.mismatch(readKernel(s.w.ns.Name), n); m != "" {
		s.rec.violate(1, "%s: the settled Node changed during the hold: %s", what, m)
	}
	if m := s.writer.check(n); m != "" {
		s.rec.violate(3, "%s: the other writer's field was lost: %s", what, m)
	}
}

// mismatch compares the Node with the oracle's expectation for kernel sample k ("" when they agree).
func (s *soak) mismatch(k sample, n *corev1.Node) string {
	internal := addrsOf(n, corev1.NodeInternalIP)
	external := addrsOf(n, corev1.NodeExternalIP)
	var internal4, internal6 []string
	for _, ip := range internal {
		if isV6(ip) {
			internal6 = append(internal6, ip)
		} else {
			internal4 = append(internal4, ip)
		}
	}
	first := func(l []string) string {
		if len(l) == 0 {
			return ""
		}
		return l[0]
	}
	var external6 []string
	for _, ip := range external {
		if isV6(ip) {
			external6 = append(external6, ip)
		}
	}
	e := expect(k, first(internal4), first(internal6), first(external6))
	var bad []string
	for _, f := range []struct {
		name      string
		got, want []string
	}{{"IPv4", internal4, e.Internal}, {"IPv6", internal6, e.Internal6}} {
		switch {
		case len(f.want) == 0 && len(f.got) > 0:
			bad = append(bad, fmt.Sprintf("%s InternalIP %v, want none", f.name, f.got))
		case len(f.want) > 0 && (len(f.got) != 1 || !slices.Contains(f.want, f.got[0])):
			bad = append(bad, fmt.Sprintf("%s InternalIP %v, want one of %v", f.name, f.got, f.want))
		}
	}
	var ext4 []string
	if e.External != "" {
		ext4 = []string{e.External}
	}
	for _, f := range []struct {
		name string
		v6   bool
		want []string // acceptable ExternalIPs (empty: none)
	}{{"IPv4", false, ext4}, {"IPv6", true, e.External6}} {
		got := slices.DeleteFunc(slices.Clone(external), func(ip string) bool { return isV6(ip) != f.v6 })
		// One of want, or none when it would equal an InternalIP (the agent drops that ExternalIP).
		ok := len(got) == 0 && (len(f.want) == 0 || slices.ContainsFunc(f.want, func(w string) bool { return slices.Contains(internal, w) })) ||
			len(got) == 1 && slices.Contains(f.want, got[0]) && !slices.Contains(internal, got[0])
		if !ok {
			bad = append(bad, fmt.Sprintf("%s ExternalIP %v, want one of %v (none if it is an InternalIP)", f.name, got, f.want))
		}
	}
	if slices.Contains(harness.TaintKeys(n), harness.Uninitialized.Key) {
		bad = append(bad, "uninitialized taint still present")
	}
	if len(addrsOf(n, corev1.NodeHostName)) != 1 {
		bad = append(bad, "Hostname entry lost")
	}
	if len(bad) == 0 {
		return ""
	}
	return strings.Join(bad, "; ") + fmt.Sprintf(" (Node %s; kernel %s)", formatAddrs(n.Status.Addresses), k)
}
