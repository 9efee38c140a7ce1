// Package discovery finds the address the Internet reaches a node behind NAT at: it asks STUN
// servers (RFC 8489 Binding requests) from the route source and keeps the answer a majority of
// them agrees on. Probes run in Run's goroutine, so Update and Mapped never wait for the network.
package discovery

import (
	"context"
	"log/slog"
	"maps"
	"net/netip"
	"sync"
	"time"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// Defaults of Config.
const (
	DefaultInterval   = 5 * time.Minute
	DefaultStaleAfter = time.Hour
	DefaultTimeout    = 5 * time.Second
	DefaultFirstRetry = 5 * time.Second
)

// Results of one STUN Binding request, the "result" label of nodeaddr_discovery_probes_total.
const (
	ProbeSuccess = "success"
	ProbeTimeout = "timeout"
	ProbeError   = "error"
)

// ProbeResults lists every probe result, for metrics to create each series up front.
func ProbeResults() []string { return []string{ProbeSuccess, ProbeTimeout, ProbeError} }

// Config configures a Discoverer.
type Config struct {
	Servers []Server
	// Interval is the re-check period of a good answer, jittered by up to 10 %.
	Interval time.Duration
	// StaleAfter is how long an answer stays in use without a round confirming it.
	StaleAfter time.Duration
	// Timeout bounds one Binding request, retransmissions included.
	Timeout time.Duration
	// FirstRetry is the first backoff after a failed round (then doubled, capped at Interval).
	FirstRetry time.Duration
	Prober     Prober // nil: STUN{}
	Logger     *slog.Logger
	// Metrics, if set, counts probes and rounds (NewMetrics); New creates its servers' series.
	Metrics *Metrics
	// OnDisagreement, if set, is called when the servers' answers for a family start to disagree.
	OnDisagreement func(f resolver.Family, reason string)
}

// Discoverer keeps the mapped address of each family current.
type Discoverer struct {
	cfg     Config
	kick    chan struct{} // Update → Run
	changed chan struct{} // Run → the loop (C)

	mu        sync.Mutex
	sources   map[resolver.Family]netip.Addr // the route sources the loop asked for
	answers   map[resolver.Family]answer
	uncovered map[resolver.Family]bool // the last round found no server with an address of it

	fams map[resolver.Family]*family // Run's own
}

// family is Run's view of one family.
type family struct {
	source      netip.Addr // the route source of the last round
	sched       schedule
	disagreeing bool // a disagreement was reported and no round agreed since
}

var families = []resolver.Family{resolver.IPv4, resolver.IPv6}

// New returns a Discoverer; nothing is sent before Run and a first Update.
func New(cfg Config) *Discoverer {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.FirstRetry <= 0 {
		cfg.FirstRetry = DefaultFirstRetry
	}
	if cfg.Prober == nil {
		cfg.Prober = STUN{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Metrics.servers(cfg.Servers)
	d := &Discoverer{cfg: cfg, kick: make(chan struct{}, 1), changed: make(chan struct{}, 1),
		sources: map[resolver.Family]netip.Addr{}, answers: map[resolver.Family]answer{},
		uncovered: map[resolver.Family]bool{}, fams: map[resolver.Family]*family{}}
	for _, f := range families {
		d.fams[f] = &family{sched: newSchedule(cfg.Interval, cfg.FirstRetry)}
	}
	return d
}

// Update hands over the route sources (per family) the ExternalIP would have without discovery;
// a family missing from sources, or that no server can answer for, is not probed. It never blocks.
func (d *Discoverer) Update(sources map[resolver.Family]netip.Addr) {
	d.mu.Lock()
	same := maps.Equal(d.sources, sources)
	if !same {
		d.sources = maps.Clone(sources)
	}
	d.mu.Unlock()
	if !same {
		signal(d.kick)
	}
}

// Covers reports whether family f is discovered: some server can answer for it, and the last
// round did not find that none has an address of it (names without an AAAA record).
func (d *Discoverer) Covers(f resolver.Family) bool {
	d.mu.Lock()
	uncovered := d.uncovered[f]
	d.mu.Unlock()
	return !uncovered && d.mayCover(f)
}

// mayCover reports whether any server can answer for family f: a name, or an IP of that family.
func (d *Discoverer) mayCover(f resolver.Family) bool {
	for _, s := range d.cfg.Servers {
		ip, err := netip.ParseAddr(s.Host)
		if err != nil || resolver.FamilyOf(ip) == f {
			return true
		}
	}
	return false
}

// Mapped returns the address a majority of the servers gave for family f less than StaleAfter ago.
func (d *Discoverer) Mapped(f resolver.Family) (netip.Addr, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.answers[f]
	if !a.current(time.Now(), d.cfg.StaleAfter) {
		return netip.Addr{}, false
	}
	return a.addr, true
}

// C fires (coalesced) when an answer appears, changes or expires: the loop should resolve again.
func (d *Discoverer) C() <-chan struct{} { return d.changed }

// Run probes as the schedules say until ctx ends.
func (d *Discoverer) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		next := d.step(ctx, time.Now())
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-timer.C:
		}
	}
}

// step probes every family that is due, expires answers and returns when to look again.
func (d *Discoverer) step(ctx context.Context, now time.Time) time.Time {
	d.mu.Lock()
	sources := maps.Clone(d.sources)
	d.mu.Unlock()
	next := now.Add(2 * d.cfg.Interval)
	changed := false
	defer func() {
		if changed { // one signal for every family's new answer: one resolution, one write
			signal(d.changed)
		}
	}()
	for _, f := range families {
		fs := d.fams[f]
		src, ok := sources[f]
		if !ok || !d.mayCover(f) {
			fs.source = netip.Addr{}
		} else {
			if src != fs.source {
				d.cfg.Logger.Info("probing for the external address", "family", f, "source", src,
					"reason", reasonFor(fs.source))
				fs.source = src
				fs.sched.now()
			}
			if fs.sched.due(now) && ctx.Err() == nil {
				changed = d.round(ctx, f, src, fs) || changed
				now = time.Now()
			}
			next = earliest(next, fs.sched.next)
		}
		if exp, ok := d.expire(f, fs, now); ok {
			next = earliest(next, exp)
		}
	}
	return next
}

func reasonFor(old netip.Addr) string {
	if old.IsValid() {
		return "source-changed"
	}
	return "new-source"
}

// expire drops an answer that has gone stale; it returns the current answer's expiry.
func (d *Discoverer) expire(f resolver.Family, fs *family, now time.Time) (time.Time, bool) {
	d.mu.Lock()
	a, ok := d.answers[f]
	if ok && !a.current(now, d.cfg.StaleAfter) {
		delete(d.answers, f)
	}
	d.mu.Unlock()
	if !ok {
		return time.Time{}, false
	}
	if a.current(now, d.cfg.StaleAfter) {
		return a.expires(d.cfg.StaleAfter), true
	}
	d.cfg.Logger.Warn("discovered external address is stale, no longer used", "family", f, "address", a.addr,
		"confirmed", a.at.Format(time.RFC3339), "reason", "stale")
	signal(d.changed)
	return time.Time{}, false
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// signal is a non-blocking send on a one-slot channel: bursts coalesce.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Once runs one round for each family of sources now, for --run-once (no Run goroutine).
func (d *Discoverer) Once(ctx context.Context, sources map[resolver.Family]netip.Addr) {
	d.Update(sources)
	for _, f := range families {
		if src, ok := sources[f]; ok && d.mayCover(f) && ctx.Err() == nil {
			d.fams[f].source = src
			_ = d.round(ctx, f, src, d.fams[f]) // Mapped is read next; no loop to signal
		}
	}
}
