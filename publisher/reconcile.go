package publisher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/resolver/explanation"
)

// reconcile makes one pass: write the addresses if they differ (with the annotations that follow
// from them, in the same write), else the annotations alone if they differ, then remove the taint
// if the addresses are right. A nil error means nothing is left to do for now.
func (p *Publisher) reconcile(ctx context.Context) error {
	node, desired, _ := p.snapshot()
	if desired == nil || node == nil {
		return nil // nothing resolved yet, or the Node does not exist: a later event wakes us
	}
	next := merge(node.Status.Addresses, desired.Managed, desired.Addresses)
	if !slices.Equal(next, node.Status.Addresses) { // order included
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
		next = merge(node.Status.Addresses, desired.Managed, desired.Addresses)
		if !slices.Equal(next, node.Status.Addresses) { // order included
			if err := p.writeAddresses(ctx, node, next, since, desired); err != nil {
				return err
			}
			if node, _, _ = p.snapshot(); node == nil {
				return nil // deleted meanwhile
			}
		}
	} else {
		p.mu.Lock()
		p.since = time.Time{}
		p.mu.Unlock()
	}
	p.reportNodeIP(node, desired.NodeIP)
	node, err := p.syncAnnotations(ctx, node, desired.Addresses)
	if err != nil || node == nil {
		return err
	}
	hasAddress := len(desired.Addresses) > 0 || desired.DroppedEqual
	if p.cfg.RemoveTaint && hasAddress && len(desired.NodeIP.Missing) == 0 && hasUninitialized(node) {
		if err := p.limiter.Wait(ctx); err != nil {
			return err
		}
		if err := p.removeTaint(ctx, node); err != nil {
			return err
		}
	}
	p.health.ready.Store(true)
	return nil
}

// syncAnnotations writes the configured annotations for the addresses on the Node (before the taint
// goes, so consumers waiting for them find them). It returns the freshest Node, nil if it vanished.
func (p *Publisher) syncAnnotations(ctx context.Context, node *corev1.Node, resolved []resolver.Address) (*corev1.Node, error) {
	changes := func(n *corev1.Node) map[string]string {
		return annotationChanges(n.Annotations, p.cfg.Annotations,
			inStatusOrder(n.Status.Addresses, p.cfg.Managed, resolved))
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
	res, err := p.patch(ctx, KindAnnotations, node, pt, data)
	if err != nil {
		return nil, err
	}
	p.annotated(res, ch)
	return res, nil
}

// annotated logs and records the annotation changes a write made.
func (p *Publisher) annotated(res *corev1.Node, ch map[string]string) {
	desc := make([]string, 0, len(ch))
	for _, a := range p.cfg.Annotations {
		if v, ok := ch[a.Key]; ok {
			desc = append(desc, fmt.Sprintf("%s=%q", a.Key, v))
		}
	}
	p.log.Info("annotations updated", "reason", "addresses-changed", "annotations", strings.Join(desc, " "),
		"resourceVersion", res.ResourceVersion)
	p.cfg.Recorder.Eventf(res, corev1.EventTypeNormal, vocab.ReasonAnnotationsUpdated, "Annotations set: %s", strings.Join(desc, " "))
}

// reportNodeIP warns once per distinct problem with the provided node IP (worker only).
func (p *Publisher) reportNodeIP(node *corev1.Node, r resolver.NodeIPOutcome) {
	p.cfg.Metrics.providedNodeIP(len(r.Missing) > 0)
	var key string
	switch {
	case r.Err != nil:
		key = r.Err.Error()
		if key != p.nodeIPWarned {
			p.log.Warn("provided node IP ignored", "reason", "invalid-annotation", "err", r.Err)
			p.cfg.Recorder.Eventf(node, corev1.EventTypeWarning, vocab.ReasonProvidedNodeIPInvalid,
				"Ignoring %v", r.Err)
		}
	case len(r.Missing) > 0:
		key = fmt.Sprint(r.Provided, r.Missing)
		if key != p.nodeIPWarned {
			p.log.Warn("provided node IP is not on this host: keeping the uninitialized taint",
				"reason", "provided-node-ip-not-found", "address", fmt.Sprint(r.Missing),
				"annotation", node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr])
			p.cfg.Recorder.Eventf(node, corev1.EventTypeWarning, vocab.ReasonProvidedNodeIPNotFound,
				"The kubelet's node IP %v (annotation %s) is not assigned to this host; the node keeps the %s taint until it is (check the kubelet's --node-ip)",
				r.Missing, cloudproviderapi.AnnotationAlphaProvidedIPAddr, cloudproviderapi.TaintExternalCloudProvider)
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
	if nb := p.detect.fight.NotBefore(); time.Now().Before(nb) {
		return nb
	}
	return time.Time{}
}

// snapshot returns the current Node (nodeCache), the desired state and when it was first wanted.
func (p *Publisher) snapshot() (*corev1.Node, *resolver.State, time.Time) {
	node := p.nodes.get()
	p.mu.Lock()
	defer p.mu.Unlock()
	return node, p.desired, p.since
}

// patch sends one preconditioned patch of the given kind and makes its answer the current Node.
func (p *Publisher) patch(ctx context.Context, kind string, node *corev1.Node, pt types.PatchType, data []byte, subresources ...string) (*corev1.Node, error) {
	res, err := p.cfg.Nodes.Patch(ctx, node.Name, pt, data, metav1.PatchOptions{FieldManager: p.cfg.FieldManager}, subresources...)
	if err != nil {
		return nil, p.failed(ctx, kind, node, err)
	}
	p.cfg.Metrics.write(kind, ResultSuccess)
	p.health.succeeded()
	p.nodes.received(res)
	return res, nil
}

// writeAddresses writes next, with the annotations that follow from it in the same write; the
// AddressesUpdated Event it records carries why.
func (p *Publisher) writeAddresses(ctx context.Context, node *corev1.Node, next []corev1.NodeAddress, since time.Time, desired *resolver.State) error {
	ann := annotationChanges(node.Annotations, p.cfg.Annotations, inStatusOrder(next, p.cfg.Managed, desired.Addresses))
	pt, data, err := statusPatch(node, next, ann)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.detect.writing(next)
	p.mu.Unlock()
	// On failure the in-flight list stays: a write that timed out may still have been applied.
	res, err := p.patch(ctx, KindAddresses, node, pt, data, "status")
	if err != nil {
		return err
	}
	old := managedOnly(node.Status.Addresses, p.cfg.Managed)
	now := managedOnly(res.Status.Addresses, p.cfg.Managed)
	p.mu.Lock()
	// The in-flight list hands over to the written one in one step: a watch echo of this write
	// that arrived in between would otherwise compare with the previous write and count as
	// another writer's revert (seen in the latency benchmark: a false AddressesOverwritten).
	p.detect.wrote(res)
	if p.since.Equal(since) {
		p.since = time.Time{}
	}
	p.mu.Unlock()
	if !since.IsZero() {
		p.cfg.Metrics.reacted(time.Since(since))
	}
	p.log.Info("addresses updated", "reason", "desired-changed", "old", fmt.Sprint(old), "new", fmt.Sprint(now),
		"resourceVersion", res.ResourceVersion)
	p.cfg.Recorder.Event(res, corev1.EventTypeNormal, vocab.ReasonAddressesUpdated, addressesUpdatedMessage(old, now, desired.Explanation))
	if ann != nil {
		p.annotated(res, ann)
	}
	return nil
}

func (p *Publisher) removeTaint(ctx context.Context, node *corev1.Node) error {
	next, _ := withoutUninitialized(node.Spec.Taints)
	pt, data, err := taintsPatch(node, next)
	if err != nil {
		return err
	}
	res, err := p.patch(ctx, KindTaint, node, pt, data)
	if err != nil {
		return err
	}
	p.log.Info("uninitialized taint removed", "reason", "addresses-reconciled")
	p.cfg.Recorder.Event(res, corev1.EventTypeNormal, vocab.ReasonTaintRemoved,
		"Removed taint "+cloudproviderapi.TaintExternalCloudProvider+": nodeaddr has set the node addresses")
	return nil
}

// failed classifies a failed write. A conflict re-reads the Node (the cache may lag the server) and
// asks for a quick retry; anything else backs off, turns readiness off and, when it persists, emits
// one Warning event. A missing Node is not counted as a failure, but its error is returned.
func (p *Publisher) failed(ctx context.Context, kind string, node *corev1.Node, err error) error {
	if isConflict(err) {
		p.cfg.Metrics.write(kind, ResultConflict)
		p.log.Info("write conflicted, re-reading the node", "kind", kind, "reason", "conflict", "err", err)
		if fresh, gerr := p.cfg.Nodes.Get(ctx, node.Name, metav1.GetOptions{}); gerr == nil {
			p.nodes.received(fresh)
		}
		return fmt.Errorf("write %s: %w: %w", kind, errConflict, err)
	}
	p.cfg.Metrics.write(kind, ResultError)
	if apierrors.IsNotFound(err) {
		p.log.Warn("node disappeared during the write", "kind", kind)
		return fmt.Errorf("write %s: %w", kind, err)
	}
	warn := p.health.failed()
	p.log.Error("write failed", "kind", kind, "err", err, "consecutive_failures", p.health.failures)
	if warn {
		p.cfg.Recorder.Eventf(node, corev1.EventTypeWarning, vocab.ReasonWriteFailed,
			"nodeaddr failed %d times in a row to write %s: %v", p.health.failures, kind, err)
	}
	return fmt.Errorf("write %s: %w", kind, err)
}

// health is the readiness and the count of consecutive failed writes (worker only, except ready).
type health struct {
	ready     atomic.Bool
	warnAfter int
	failures  int
	warned    bool
}

// succeeded resets the failure count.
func (h *health) succeeded() { h.failures, h.warned = 0, false }

// failed counts a failed write and reports whether it is the one to warn about.
func (h *health) failed() (warn bool) {
	h.failures++
	h.ready.Store(false)
	if h.failures >= h.warnAfter && !h.warned {
		h.warned = true
		return true
	}
	return false
}

// addressesUpdatedMessage is the message of the AddressesUpdated Event: the change from old to now,
// then why, in the form resolver/explanation.Parse reads, bounded to vocab.EventMessageLimit.
func addressesUpdatedMessage(old, now []corev1.NodeAddress, why []resolver.Explained) string {
	return explanation.Format(fmt.Sprintf("Addresses changed from %v to %v", old, now), why, vocab.EventMessageLimit)
}
