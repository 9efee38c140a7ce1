package soak

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// recorder keeps the fault timeline, the violations and the run's figures.
type recorder struct {
	seed  uint64
	start time.Time

	mu         sync.Mutex
	events     []event
	faults     map[string]int
	stalls     []interval // partitions and frozen agents: a request sent late is not the agent's decision
	violations []string
	converge   []time.Duration
	worst      time.Duration
	worstAt    string
	cycles     int
	writes     int
	history    []string // the Node's writes, from the audit log
	usageLine  string
	oracleLine string // how late the oracle's reads were behind the kernel's notifications
	// readLate counts the agent's writes that samples stamped by when their read began would
	// have reported under invariant 2 (the stamping before the notifications).
	readLate int
	// throttled counts the 100 ms periods in which the pressure fault's CPU quota stopped the
	// agent's cgroup.
	throttled int
}

type event struct {
	at   time.Time
	kind string
	msg  string
}

type interval struct{ from, to time.Time }

func newRecorder(seed uint64) *recorder {
	return &recorder{seed: seed, start: time.Now(), faults: map[string]int{}}
}

func (r *recorder) event(kind, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{at: time.Now(), kind: kind, msg: fmt.Sprintf(format, args...)})
}

func (r *recorder) fault(name string) {
	r.mu.Lock()
	r.faults[name]++
	r.mu.Unlock()
}

func (r *recorder) stall(from, to time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stalls = append(r.stalls, interval{from, to})
}

// stalledWithin is how long requests could have been held back in [from, to].
func (r *recorder) stalledWithin(from, to time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d time.Duration
	for _, s := range r.stalls {
		a, b := s.from, s.to
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			d += b.Sub(a)
		}
	}
	return d
}

func (r *recorder) addHistory(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.history = append(r.history, line)
}

// violate records a broken invariant with the seed, the fault timeline around it and the Node's
// recent history.
func (r *recorder) violate(inv int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.event("VIOLATION", "invariant %d: %s", inv, msg)
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "VIOLATION of invariant %d (seed %d, replay with NODEADDR_SOAK_SEED=%d) at +%s: %s\n",
		inv, r.seed, r.seed, r.since(time.Now()), msg)
	b.WriteString("fault timeline (last 40 entries):\n")
	from := max(0, len(r.events)-40)
	for _, e := range r.events[from:] {
		fmt.Fprintf(&b, "  +%-9s %-9s %s\n", r.since(e.at), e.kind, e.msg)
	}
	b.WriteString("Node history (last 25 writes):\n")
	for _, h := range r.history[max(0, len(r.history)-25):] {
		fmt.Fprintf(&b, "  %s\n", h)
	}
	r.violations = append(r.violations, b.String())
	fmt.Printf("soak: VIOLATION of invariant %d at +%s: %s\n", inv, r.since(time.Now()), msg)
}

func (r *recorder) since(t time.Time) string {
	return t.Sub(r.start).Round(10 * time.Millisecond).String()
}

func (r *recorder) converged(d time.Duration, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.converge = append(r.converge, d)
	if d > r.worst {
		r.worst, r.worstAt = d, what
	}
}

func (r *recorder) violationCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.violations)
}

// summary is the run's result, as docs/BENCHMARKS.md shows it.
func (r *recorder) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, duration %s, %d cycles, %d agent Node writes, %d violations\n",
		r.seed, time.Since(r.start).Round(time.Second), r.cycles, r.writes, len(r.violations))
	names := make([]string, 0, len(r.faults))
	total := 0
	for n, c := range r.faults {
		names = append(names, n)
		total += c
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "faults: %d in all:", total)
	for _, n := range names {
		fmt.Fprintf(&b, " %s %d,", n, r.faults[n])
	}
	b.WriteString("\n")
	if len(r.converge) > 0 {
		s := append([]time.Duration(nil), r.converge...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		fmt.Fprintf(&b, "convergence after the last fault of a cycle: median %s, p95 %s, worst %s (%s)\n",
			s[len(s)/2].Round(10*time.Millisecond), s[len(s)*95/100].Round(10*time.Millisecond),
			r.worst.Round(10*time.Millisecond), r.worstAt)
	}
	if r.usageLine != "" {
		b.WriteString(r.usageLine + "\n")
	}
	if n := r.faults["cpu-io-pressure"]; n > 0 {
		fmt.Fprintf(&b, "pressure: %d faults; the agent's cgroup throttled in %d periods of 100 ms\n", n, r.throttled)
	}
	if r.oracleLine != "" {
		b.WriteString(r.oracleLine + "\n")
	}
	return b.String()
}
