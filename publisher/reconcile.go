package publisher

// The single worker: one level-triggered reconcile pass, retried with backoff.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// work is the single writer: it waits for a wake-up, reconciles, and retries failures with backoff.
func (p *Publisher) work(ctx context.Context) {
	var retry <-chan time.Time
	var timer *time.Timer
	backoff := retryBackoff(p.cfg.MinBackoff, p.cfg.MaxBackoff)
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-p.dirty:
		case <-retry:
		}
		err := p.reconcile(ctx)
		if ctx.Err() != nil {
			return
		}
		if timer != nil {
			timer.Stop()
			retry = nil
		}
		if err == nil {
			backoff = retryBackoff(p.cfg.MinBackoff, p.cfg.MaxBackoff)
			continue
		}
		var delay time.Duration
		var hold holdError
		switch {
		case errors.As(err, &hold):
			delay = time.Until(hold.until)
		case errors.Is(err, errConflict):
			// A conflict is this Node's own race, not a fleet-wide outage: retry soon.
			delay = max(p.cfg.MinBackoff/4, time.Millisecond)
		default:
			delay = backoff.Step()
		}
		timer = time.NewTimer(delay)
		retry = timer.C
	}
}

var errConflict = errors.New("conflict")

// holdError defers a rewrite of reverted addresses until the revert backoff allows it.
type holdError struct{ until time.Time }

func (h holdError) Error() string { return "rewrite held back until " + h.until.Format(time.RFC3339) }

// reconcile makes one pass: write the addresses if they differ, then remove the taint if it is
// there and the addresses are right. A nil error means nothing is left to do for now.
func (p *Publisher) reconcile(ctx context.Context) error {
	node, desired, _ := p.snapshot()
	if desired == nil || node == nil {
		return nil // nothing resolved yet, or the Node does not exist: a later event wakes us
	}
	nip := p.nodeIP(node, desired)
	next := Compose(node.Status.Addresses, desired.Managed, nip.Addresses, p.cfg.KeepExternalEqualInternal)
	if !slices.Equal(next, node.Status.Addresses) {
		if until := p.holdUntil(); !until.IsZero() {
			return holdError{until}
		}
		if err := p.limiter.Wait(ctx); err != nil {
			return err
		}
		// Latest state wins: the desired state and the Node may have moved during the wait.
		var since time.Time
		node, desired, since = p.snapshot()
		if desired == nil || node == nil {
			return nil
		}
		nip = p.nodeIP(node, desired)
		next = Compose(node.Status.Addresses, desired.Managed, nip.Addresses, p.cfg.KeepExternalEqualInternal)
		if !slices.Equal(next, node.Status.Addresses) {
			if err := p.writeAddresses(ctx, node, next, since); err != nil {
				return err
			}
			if node, _, _ = p.snapshot(); node == nil {
				return nil // deleted meanwhile (forget)
			}
		}
	} else {
		p.clearSince()
	}
	p.reportNodeIP(node, nip)
	node, err := p.syncAnnotations(ctx, node, nip.Addresses)
	if err != nil || node == nil {
		return err
	}
	if p.cfg.RemoveTaint && len(nip.Addresses) > 0 && len(nip.Missing) == 0 && hasUninitialized(node) {
		if err := p.limiter.Wait(ctx); err != nil {
			return err
		}
		if err := p.removeTaint(ctx, node); err != nil {
			return err
		}
	}
	p.ready.Store(true)
	return nil
}

// syncAnnotations writes the configured annotations for the addresses on the Node (before the taint
// goes, so consumers waiting for them find them). It returns the freshest Node, nil if it vanished.
func (p *Publisher) syncAnnotations(ctx context.Context, node *corev1.Node, resolved []resolver.Address) (*corev1.Node, error) {
	changes := func(n *corev1.Node) map[string]string {
		return AnnotationChanges(n.Annotations, p.cfg.Annotations,
			InStatusOrder(n.Status.Addresses, p.cfg.Managed, resolved))
	}
	if len(p.cfg.Annotations) == 0 || changes(node) == nil {
		return node, nil
	}
	if err := p.limiter.Wait(ctx); err != nil {
		return nil, err
	}
	if node, _, _ = p.snapshot(); node == nil {
		return nil, nil
	}
	ch := changes(node) // the Node may have moved during the wait
	if ch == nil {
		return node, nil
	}
	pt, data, err := annotationsPatch(node, ch)
	if err != nil {
		return nil, err
	}
	res, err := p.cfg.Nodes.Patch(ctx, node.Name, pt, data,
		metav1.PatchOptions{FieldManager: p.cfg.FieldManager})
	if err != nil {
		return nil, p.failed(ctx, KindAnnotations, node, err)
	}
	p.succeeded(KindAnnotations)
	p.mu.Lock()
	if newer(res, p.node) {
		p.node = res
	}
	p.mu.Unlock()
	desc := make([]string, 0, len(ch))
	for _, a := range p.cfg.Annotations {
		if v, ok := ch[a.Key]; ok {
			desc = append(desc, fmt.Sprintf("%s=%q", a.Key, v))
		}
	}
	p.log.Info("annotations updated", "reason", "addresses-changed", "annotations", strings.Join(desc, " "),
		"resourceVersion", res.ResourceVersion)
	p.cfg.Recorder.Eventf(res, corev1.EventTypeNormal, ReasonAnnotationsUpdated, "Annotations set: %s", strings.Join(desc, " "))
	return res, nil
}

// nodeIP applies the kubelet's provided-node-ip annotation to the desired state.
func (p *Publisher) nodeIP(node *corev1.Node, desired *resolver.State) NodeIPResult {
	return ApplyProvidedNodeIP(node.Annotations[AnnotationProvidedNodeIP], *desired)
}

// reportNodeIP warns once per distinct problem with the provided node IP (log, Warning event,
// metric) and says so when it is solved. Called by the worker only.
func (p *Publisher) reportNodeIP(node *corev1.Node, r NodeIPResult) {
	p.obs.OnProvidedNodeIP(len(r.Missing) > 0)
	var key string
	switch {
	case r.Err != nil:
		key = r.Err.Error()
		if key != p.nodeIPWarned {
			p.log.Warn("provided node IP ignored", "reason", "invalid-annotation", "err", r.Err)
			p.cfg.Recorder.Eventf(node, corev1.EventTypeWarning, ReasonProvidedNodeIPInvalid,
				"Ignoring %v", r.Err)
		}
	case len(r.Missing) > 0:
		key = fmt.Sprint(r.Provided, r.Missing)
		if key != p.nodeIPWarned {
			p.log.Warn("provided node IP is not on this host: keeping the uninitialized taint",
				"reason", "provided-node-ip-not-found", "address", fmt.Sprint(r.Missing),
				"annotation", node.Annotations[AnnotationProvidedNodeIP])
			p.cfg.Recorder.Eventf(node, corev1.EventTypeWarning, ReasonProvidedNodeIPNotFound,
				"The kubelet's node IP %v (annotation %s) is not assigned to this host; the node keeps the %s taint until it is (check the kubelet's --node-ip)",
				r.Missing, AnnotationProvidedNodeIP, UninitializedTaint)
		}
	default:
		if p.nodeIPWarned != "" {
			p.log.Info("provided node IP problem resolved", "address", fmt.Sprint(r.Provided))
		}
	}
	p.nodeIPWarned = key
}

// holdUntil returns when a rewrite fought over with another writer may happen, zero if now.
func (p *Publisher) holdUntil() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if nb := p.fight.NotBefore(); time.Now().Before(nb) {
		return nb
	}
	return time.Time{}
}

func (p *Publisher) snapshot() (*corev1.Node, *resolver.State, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.node, p.desired, p.since
}

func (p *Publisher) clearSince() {
	p.mu.Lock()
	p.since = time.Time{}
	p.mu.Unlock()
}
