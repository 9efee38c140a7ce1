package publisher

// The writes: each a JSON patch with a precondition on the field it changes.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (p *Publisher) writeAddresses(ctx context.Context, node *corev1.Node, next []corev1.NodeAddress, since time.Time) error {
	pt, data, err := addressesPatch(node, next)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.inflight = Managed(next, p.cfg.Managed)
	p.mu.Unlock()
	res, err := p.cfg.Nodes.Patch(ctx, node.Name, pt, data,
		metav1.PatchOptions{FieldManager: p.cfg.FieldManager}, "status")
	if err != nil {
		// inflight stays: a write that timed out may still have been applied, and its echo is no
		// other writer's.
		return p.failed(ctx, KindAddresses, node, err)
	}
	p.succeeded(KindAddresses)
	trimNode(res)
	old := Managed(node.Status.Addresses, p.cfg.Managed)
	now := Managed(res.Status.Addresses, p.cfg.Managed)
	p.mu.Lock()
	if newer(res, p.node) {
		p.node = res
	}
	// inflight hands over to written in one step: a watch echo of this write that arrives in
	// between would otherwise compare with the previous write and count as another writer's
	// revert (seen in the latency benchmark: false AddressesOverwritten and a 40 s back-off).
	p.inflight = nil
	p.written, p.writeRV, p.reverted = now, res.ResourceVersion, false
	if p.since.Equal(since) {
		p.since = time.Time{}
	}
	p.mu.Unlock()
	if !since.IsZero() {
		p.obs.OnReaction(time.Since(since))
	}
	p.log.Info("addresses updated", "reason", "desired-changed", "old", fmt.Sprint(old), "new", fmt.Sprint(now),
		"resourceVersion", res.ResourceVersion)
	p.cfg.Recorder.Eventf(res, corev1.EventTypeNormal, ReasonAddressesUpdated, "Addresses changed from %v to %v", old, now)
	return nil
}

func (p *Publisher) removeTaint(ctx context.Context, node *corev1.Node) error {
	next, _ := WithoutUninitialized(node.Spec.Taints)
	pt, data, err := taintsPatch(node, next)
	if err != nil {
		return err
	}
	res, err := p.cfg.Nodes.Patch(ctx, node.Name, pt, data,
		metav1.PatchOptions{FieldManager: p.cfg.FieldManager})
	if err != nil {
		return p.failed(ctx, KindTaint, node, err)
	}
	p.succeeded(KindTaint)
	trimNode(res)
	p.mu.Lock()
	if newer(res, p.node) {
		p.node = res
	}
	p.mu.Unlock()
	p.obs.OnTaint(false)
	p.log.Info("uninitialized taint removed", "reason", "addresses-reconciled")
	p.cfg.Recorder.Event(res, corev1.EventTypeNormal, ReasonTaintRemoved,
		"Removed taint "+UninitializedTaint+": nodeaddr has set the node addresses")
	return nil
}

func (p *Publisher) succeeded(kind string) {
	p.obs.OnWrite(kind, ResultSuccess)
	p.failures, p.warned = 0, false
}

// failed classifies a failed write. A conflict re-reads the Node (the cache may lag the server) and
// asks for a quick retry; anything else backs off, turns readiness off and, when it persists, emits
// one Warning event. A missing Node is not counted as a failure (the informer reports its deletion
// and re-creation), but the error is returned: nothing was written, so the caller must neither go on
// to the taint nor report the Node ready, and ReconcileOnce waits for the Node.
func (p *Publisher) failed(ctx context.Context, kind string, node *corev1.Node, err error) error {
	if isConflict(err) {
		p.obs.OnWrite(kind, ResultConflict)
		p.log.Info("write conflicted, re-reading the node", "kind", kind, "reason", "conflict", "err", err)
		fresh, gerr := p.cfg.Nodes.Get(ctx, node.Name, metav1.GetOptions{})
		if gerr == nil {
			trimNode(fresh)
			p.mu.Lock()
			if newer(fresh, p.node) {
				p.node = fresh
			}
			p.mu.Unlock()
		}
		return errConflict
	}
	p.obs.OnWrite(kind, ResultError)
	if apierrors.IsNotFound(err) {
		p.log.Warn("node disappeared during the write", "kind", kind)
		return err
	}
	p.failures++
	p.ready.Store(false)
	p.log.Error("write failed", "kind", kind, "err", err, "consecutive_failures", p.failures)
	if p.failures >= p.cfg.FailuresBeforeWarning && !p.warned {
		p.warned = true
		p.cfg.Recorder.Eventf(node, corev1.EventTypeWarning, ReasonWriteFailed,
			"nodeaddr failed %d times in a row to write %s: %v", p.failures, kind, err)
	}
	return err
}
