package publisher

import (
	"context"
	"fmt"
	"time"

	cloudproviderapi "k8s.io/cloud-provider/api"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeaddr/nodeaddr/resolver"
)

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

// writeAddresses writes next; the AddressesUpdated Event it records carries why.
func (p *Publisher) writeAddresses(ctx context.Context, node *corev1.Node, next []corev1.NodeAddress, since time.Time, why []resolver.Explained) error {
	pt, data, err := addressesPatch(node, next)
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
	p.cfg.Recorder.Event(res, corev1.EventTypeNormal, ReasonAddressesUpdated, addressesUpdatedMessage(old, now, why))
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
	p.cfg.Recorder.Event(res, corev1.EventTypeNormal, ReasonTaintRemoved,
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
		p.cfg.Recorder.Eventf(node, corev1.EventTypeWarning, ReasonWriteFailed,
			"nodeaddr failed %d times in a row to write %s: %v", p.health.failures, kind, err)
	}
	return fmt.Errorf("write %s: %w", kind, err)
}
