package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// round asks every server from src, votes, and records the outcome. It reports whether the
// answer or the family's coverage changed.
func (d *Discoverer) round(ctx context.Context, f resolver.Family, src netip.Addr, fs *family) bool {
	replies := d.probeAll(ctx, f, src)
	if ctx.Err() != nil {
		return false // shutting down: the replies are cancellations, not the servers' answers
	}
	now := time.Now()
	covChanged, covered := d.updateCoverage(f, len(replies) > 0, now)
	if !covered {
		// No server has an address of this family: look again at the next re-check.
		fs.sched.succeeded(now)
		if covChanged {
			d.cfg.Logger.Info("no STUN server has an address of this family; its ExternalIP stays the route source",
				"family", f, "source", src, "recheck_at", fs.sched.next.Format(time.RFC3339))
		}
		return covChanged
	}
	v := Vote(replies, len(replies))
	if len(replies) == 0 {
		v = Verdict{Outcome: NoAnswer, Reason: "no server has an address of this family now"}
	}
	d.cfg.Metrics.round(f, v.Outcome, now)
	if v.Outcome == Agreed {
		return d.agreed(f, src, v.Addr, fs, now, len(replies)) || covChanged
	}
	d.failed(f, src, v, fs, now)
	return covChanged
}

// updateCoverage records whether family f is covered: some server has an address of it, or the
// family still has a current answer (a lost server is a failed probe until the answer is stale).
func (d *Discoverer) updateCoverage(f resolver.Family, hasServer bool, now time.Time) (changed, covered bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	covered = hasServer || d.answers[f].current(now, d.cfg.StaleAfter)
	changed = d.uncovered[f] == covered
	d.uncovered[f] = !covered
	return changed, covered
}

// agreed records an agreed address; it reports whether the answer appeared or changed.
func (d *Discoverer) agreed(f resolver.Family, src, addr netip.Addr, fs *family, now time.Time, servers int) bool {
	fs.sched.succeeded(now)
	fs.disagreeing = false
	d.mu.Lock()
	old := d.answers[f]
	d.answers[f] = answer{addr: addr, at: now}
	d.mu.Unlock()
	if old.addr != addr || !old.current(now, d.cfg.StaleAfter) {
		d.cfg.Logger.Info("external address discovered", "family", f, "address", addr, "previous", old.addr,
			"source", src, "servers", servers)
		return true
	}
	d.cfg.Logger.Debug("external address confirmed", "family", f, "address", addr, "source", src)
	return false
}

// failed records a round without an agreed address (the last answer is kept until it is stale).
func (d *Discoverer) failed(f resolver.Family, src netip.Addr, v Verdict, fs *family, now time.Time) {
	fs.sched.failed(now)
	d.mu.Lock()
	kept := d.answers[f]
	d.mu.Unlock()
	attrs := []any{"family", f, "source", src, "outcome", string(v.Outcome), "reason", v.Reason,
		"retry_at", fs.sched.next.Format(time.RFC3339Nano)}
	if kept.current(now, d.cfg.StaleAfter) {
		attrs = append(attrs, "kept", kept.addr, "until", kept.expires(d.cfg.StaleAfter).Format(time.RFC3339))
	}
	d.cfg.Logger.Warn("external address discovery failed", attrs...)
	if v.Outcome == Disagreement && !fs.disagreeing {
		// Once per episode, until a round agrees: the reason may change every round.
		fs.disagreeing = true
		if d.cfg.OnDisagreement != nil {
			d.cfg.OnDisagreement(f, v.Reason)
		}
	}
}

// probeAll sends one Binding request to each server in parallel, each with its own timeout; a
// server that has no address of family f takes no part.
func (d *Discoverer) probeAll(ctx context.Context, f resolver.Family, src netip.Addr) []Reply {
	replies := make([]Reply, len(d.cfg.Servers))
	var wg sync.WaitGroup
	for i, s := range d.cfg.Servers {
		wg.Go(func() {
			replies[i] = d.probe(ctx, f, src, s)
		})
	}
	wg.Wait()
	out := replies[:0]
	for _, r := range replies {
		if !errors.Is(r.Err, errNoFamily) {
			out = append(out, r)
		}
	}
	return out
}

func (d *Discoverer) probe(ctx context.Context, f resolver.Family, src netip.Addr, s Server) Reply {
	pctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	start := time.Now()
	addr, err := d.cfg.Prober.Probe(pctx, src, s)
	took := time.Since(start)
	if err == nil {
		err = checkMapped(addr, f)
	}
	if errors.Is(err, errNoFamily) {
		return Reply{Server: s.String(), Err: err}
	}
	result := ProbeSuccess
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		result = ProbeTimeout
	case err != nil:
		result = ProbeError
	}
	if ctx.Err() == nil {
		d.cfg.Metrics.probe(s.String(), result, took)
	}
	if err != nil {
		d.cfg.Logger.Debug("STUN probe failed", "server", s.String(), "family", f, "source", src, "err", err)
		return Reply{Server: s.String(), Err: err}
	}
	return Reply{Server: s.String(), Addr: addr}
}

// checkMapped refuses an answer that cannot be this family's public address.
func checkMapped(a netip.Addr, f resolver.Family) error {
	switch {
	case !a.IsValid():
		return errors.New("no mapped address")
	case resolver.FamilyOf(a) != f:
		return fmt.Errorf("mapped address %s is not %s", a, f)
	case a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast():
		return fmt.Errorf("mapped address %s is not a unicast address", a)
	}
	return nil
}
