package csrapproval

import (
	"context"
	"math/rand/v2"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// A read that failed while the window is open is tried again after readRetry, doubling up to
// readRetryMax; the window's end bounds the whole.
const (
	readRetry    = time.Second
	readRetryMax = 30 * time.Second
)

// control watches while the window is open and, while it is closed, LISTs once per backstop tick
// when a CSR may come (expectsCSR). Closed, it makes no request at all between ticks.
func (a *Approver) control(ctx context.Context, tick <-chan time.Time) {
	for ctx.Err() == nil {
		if a.isOpen() {
			a.watchWindow(ctx, tick)
			a.cfg.Logger.Debug("kubelet serving CSR window closed", "node", a.cfg.Node)
			continue
		}
		select {
		case <-ctx.Done():
		case <-a.kick:
		case <-tick:
			if !a.expectsCSR() {
				continue // the kubelet's certificate is current: no CSR to come
			}
			if _, err := a.list(ctx); err != nil && ctx.Err() == nil {
				a.cfg.Logger.Warn("kubelet serving CSRs not listed, next backstop in", "node", a.cfg.Node,
					"err", err, "retry_in", a.cfg.Backstop)
			}
		}
	}
}

// ticks sends the backstop ticks until ctx ends: the first after a random part of the interval, so
// that agents started together (a DaemonSet rollout) do not LIST together, then one per interval.
// A tick nobody took is dropped. Nil without a backstop.
func ticks(ctx context.Context, every time.Duration) <-chan time.Time {
	if every <= 0 {
		return nil
	}
	c := make(chan time.Time, 1)
	go func() {
		first := time.NewTimer(rand.N(every))
		defer first.Stop()
		select {
		case <-ctx.Done():
			return
		case now := <-first.C:
			offer(c, now)
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				offer(c, now)
			}
		}
	}()
	return c
}

func offer(c chan time.Time, now time.Time) {
	select {
	case c <- now:
	default:
	}
}

// isOpen reports whether the window is open now; a settled window is closed for good.
func (a *Approver) isOpen() bool {
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	var own []filing
	for _, c := range a.csrs {
		own = append(own, filing{created: c.CreationTimestamp.Time, decided: decided(c)})
	}
	if a.win.isOpen(now, own) {
		return true
	}
	a.win.close()
	return false
}

// watchWindow watches the CSRs until the window closes: from the resource version of the Node
// change that opened it, or from a LIST of them; a broken watch resumes from the last resource
// version, an expired one (or one that fails at once) lists again.
func (a *Approver) watchWindow(ctx context.Context, tick <-chan time.Time) {
	a.mu.Lock()
	rv := a.win.start()
	a.mu.Unlock()
	relist, retry := rv == "", readRetry
	for ctx.Err() == nil && a.isOpen() {
		var err error
		if relist {
			rv, err = a.list(ctx)
			relist = err != nil
		} else {
			rv, relist, err = a.watchFrom(ctx, rv, tick)
		}
		if err == nil {
			retry = readRetry
			continue
		}
		if ctx.Err() != nil {
			return
		}
		a.cfg.Logger.Warn("kubelet serving CSRs not read", "node", a.cfg.Node, "err", err, "retry_in", retry)
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
		retry = min(2*retry, readRetryMax)
	}
}

// list reads the kubelet-serving CSRs (from the API server's watch cache), keeps the Node's own,
// queues the pending ones not yet decided on the current own state, and returns the list's
// resource version.
func (a *Approver) list(ctx context.Context) (string, error) {
	l, err := a.cfg.CSRs.List(ctx, metav1.ListOptions{FieldSelector: SignerFieldSelector, ResourceVersion: "0"})
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	seen := map[string]bool{}
	for i := range l.Items {
		if c := &l.Items[i]; a.mine(c) {
			a.csrs[c.Name] = c
			seen[c.Name] = true
		}
	}
	for name := range a.csrs {
		if !seen[name] {
			a.forget(name)
		}
	}
	a.mu.Unlock()
	a.requeue()
	a.wake()
	return l.ResourceVersion, nil
}

// watchFrom watches from rv until the window closes, the watch ends or fails, and returns the last
// resource version seen, and relist when the watch cannot resume from it (expired, or failed).
func (a *Approver) watchFrom(ctx context.Context, rv string, tick <-chan time.Time) (last string, relist bool, err error) {
	a.mu.Lock()
	left := a.win.until.Sub(a.cfg.Now())
	a.mu.Unlock()
	secs := max(int64(left/time.Second)+1, 1)
	w, err := a.cfg.CSRs.Watch(ctx, metav1.ListOptions{FieldSelector: SignerFieldSelector, ResourceVersion: rv,
		AllowWatchBookmarks: true, TimeoutSeconds: &secs})
	if err != nil {
		return rv, true, err
	}
	defer w.Stop()
	end := time.NewTimer(left)
	defer end.Stop()
	recheck := time.NewTimer(0)
	defer recheck.Stop()
	a.armRecheck(recheck)
	for {
		select {
		case <-ctx.Done():
			return rv, false, nil
		case <-end.C:
			return rv, false, nil
		case <-tick: // the watch is the backstop while it runs
		case <-recheck.C:
		case <-a.kick: // opened again (its minimum time open starts over) or a CSR decided
			a.armRecheck(recheck)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, false, nil
			}
			var expired bool
			if rv, expired, err = a.apply(ev, rv); expired {
				return rv, true, nil
			} else if err != nil {
				return rv, true, err
			}
		}
		if !a.isOpen() {
			return rv, false, nil
		}
	}
}

// armRecheck sets t to fire when the window may settle without any event (its minimum time open
// ends); stopped when that has passed.
func (a *Approver) armRecheck(t *time.Timer) {
	now := a.cfg.Now()
	a.mu.Lock()
	at := a.win.recheckAt(now)
	a.mu.Unlock()
	t.Stop()
	if !at.IsZero() {
		t.Reset(at.Sub(now))
	}
}

// apply takes one watch event into the Node's CSRs and returns the resource version to resume from;
// expired: the watch's resource version is too old (list again).
func (a *Approver) apply(ev watch.Event, rv string) (next string, expired bool, err error) {
	if ev.Type == watch.Error {
		err := apierrors.FromObject(ev.Object)
		return rv, apierrors.IsResourceExpired(err) || apierrors.IsGone(err), err
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return rv, false, err
	}
	next = m.GetResourceVersion()
	c, ok := ev.Object.(*certv1.CertificateSigningRequest)
	if !ok || ev.Type == watch.Bookmark || !a.mine(c) {
		return next, false, nil
	}
	a.mu.Lock()
	if ev.Type == watch.Deleted {
		a.forget(c.Name)
	} else {
		a.csrs[c.Name] = c
		a.enqueue(c)
	}
	a.mu.Unlock()
	return next, false, nil
}
