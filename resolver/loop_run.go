package resolver

import (
	"context"
	"log/slog"
	"slices"
	"time"
)

// run is the state of one Loop.Run: the pending burst, the deadlines and what was published.
type run struct {
	l         *Loop
	deb       debouncer
	hold      holdDown
	since     time.Time // first event of the pending burst
	kernel    *State    // the last result of the kernel's stages (selection, discovery, hold-down)
	published *State
	node      NodeInput   // the Node as last read
	wake      *time.Timer // fires for debounce, hold-down and retry deadlines
	holdUntil time.Time
	retryAt   time.Time
	waited    string // which debounce hold the resolution under way waited for ("" but after netlink events)
}

func newRun(l *Loop) *run {
	return &run{l: l, deb: debouncer{Quiet: l.cfg.Debounce, LinkQuiet: max(l.cfg.LinkDebounce, l.cfg.Debounce), MaxDelay: l.cfg.MaxDelay},
		hold: holdDown{Grace: l.cfg.RemovalGrace}, wake: time.NewTimer(0)}
}

// awaitNode waits until the Node is seen (cfg.Node); false if ctx ended first.
func (r *run) awaitNode(ctx context.Context) bool {
	v, ok := r.l.node()
	if !ok {
		r.l.cfg.Logger.Info("waiting for the Node before the first resolution")
		r.l.awaiting.Store(true)
		defer r.l.awaiting.Store(false)
	}
	for !ok {
		select {
		case <-ctx.Done():
			return false
		case <-r.l.nodeKick:
			v, ok = r.l.node()
		}
	}
	r.node = v
	r.hold.Seed(v.Addresses)
	r.l.lastTurn.Store(time.Now().UnixNano())
	return true
}

// event takes a kernel change signal whose burst began at first; link: it had a link event.
func (r *run) event(first time.Time, link bool) {
	if first.IsZero() {
		first = time.Now()
	}
	if r.since.IsZero() || first.Before(r.since) {
		r.since = first
	}
	r.deb.Event(time.Now(), link)
}

// nodeChanged reads the Node again: it resolves if the pod CIDRs changed, else reruns the Node's stages.
func (r *run) nodeChanged() {
	v, ok := r.l.node()
	if !ok {
		return // deleted: keep the last view until it is back
	}
	cidrs := !slices.Equal(v.PodCIDRs, r.node.PodCIDRs)
	others := v.ProvidedNodeIP != r.node.ProvidedNodeIP || !slices.Equal(v.Unmanaged, r.node.Unmanaged)
	r.node = v
	switch {
	case cidrs:
		r.resolve("pod-cidrs-changed")
	case others && r.kernel != nil:
		r.publish("node-changed", time.Time{})
	}
}

// due resolves if the debounce, the hold-down or the retry deadline has passed.
func (r *run) due(now time.Time) {
	if d, ok := r.deb.Due(); ok && !now.Before(d) {
		r.waited = r.deb.Wait()
		r.l.cfg.Logger.Debug("kernel changes settled", "since", r.since.Format(time.RFC3339Nano), "waited", r.waited)
		r.resolve("netlink")
		r.waited = ""
	} else if !r.holdUntil.IsZero() && !now.Before(r.holdUntil) {
		r.resolve("removal-grace-expired")
	} else if !r.retryAt.IsZero() && !now.Before(r.retryAt) {
		r.resolve("retry")
	}
}

// resolve runs the kernel's stages (selection, discovery, hold-down), then publish.
func (r *run) resolve(reason string) {
	l, log := r.l, r.l.cfg.Logger
	now := time.Now()
	r.deb.Reset()
	r.retryAt = time.Time{}
	// The reference for stickiness: the last kernel result, else the Node's addresses.
	prev := State{Managed: l.cfg.Policy.Managed, Addresses: r.node.Addresses}
	if r.kernel != nil {
		prev = *r.kernel
	}
	raw, skips, err := ResolvePolicy(l.cfg.Kernel, l.cfg.Policy.Excluding(r.node.PodCIDRs), prev)
	if err != nil {
		l.observe(ResultError)
		log.Warn("resolution failed", "reason", reason, "err", err, "retry_in", l.cfg.RetryInterval)
		r.retryAt = now.Add(l.cfg.RetryInterval)
		// The retry applies the hold-down again. A hold-down deadline left in the past would
		// re-arm the timer at once and retry in a tight loop until netlink recovers.
		r.holdUntil = time.Time{}
		return
	}
	l.observe(ResultSuccess)
	logSkips(log, skips)
	if l.cfg.Discovery != nil {
		raw = WithDiscovery(l.cfg.Discovery, raw)
	}
	eff, next := r.hold.Apply(now, raw)
	r.holdUntil = next
	if !next.IsZero() {
		log.Info("address no longer resolves, holding it", "reason", reason,
			"state", eff.String(), "until", next.Format(time.RFC3339Nano))
	}
	r.kernel = &eff
	r.publish(reason, r.since)
	r.since = time.Time{}
	if rt, ok := l.cfg.Kernel.(RuleTables); ok && l.cfg.RouteTables != nil {
		if tables, err := rt.RuleTables(); err == nil {
			l.cfg.RouteTables.SetRouteTables(tables)
		}
	}
}

// publish runs the Node's stages on the last kernel result and hands the outcome to the sink.
func (r *run) publish(reason string, since time.Time) {
	l, log := r.l, r.l.cfg.Logger
	out := nodeStages(l.cfg.Policy, r.node, *r.kernel)
	if Changed(r.published, out) {
		old := "none"
		if r.published != nil {
			old = r.published.String()
		}
		attrs := []any{"reason", reason, "old", old, "new", out.String()}
		if r.waited != "" { // the debounce's wait behind a netlink resolution, and which hold set it
			attrs = append(attrs, "waited", r.waited)
		}
		log.Info("desired addresses changed", attrs...)
		logExplanation(log, out.Explanation)
	}
	r.published = &out
	l.sink.Publish(out, since)
}

// arm sets the wake timer to the earliest pending deadline.
func (r *run) arm() {
	var due time.Time
	if d, ok := r.deb.Due(); ok {
		due = d
	}
	for _, t := range []time.Time{r.holdUntil, r.retryAt} {
		if !t.IsZero() && (due.IsZero() || t.Before(due)) {
			due = t
		}
	}
	if !r.wake.Stop() {
		select {
		case <-r.wake.C:
		default:
		}
	}
	if !due.IsZero() {
		r.wake.Reset(max(time.Until(due), 0))
	}
}

// logSkips logs, at debug level, why candidates and targets gave no address.
func logSkips(log *slog.Logger, skips []Skip) {
	for _, s := range skips {
		if !s.Target.IP.IsValid() {
			log.Debug("candidate skipped", "type", s.Target.Type, "address", s.Source, "reason", s.Reason)
			continue
		}
		log.Debug("target not resolved", "type", s.Target.Type, "target", s.Target.IP,
			"source", s.Source, "reason", s.Reason)
	}
}
