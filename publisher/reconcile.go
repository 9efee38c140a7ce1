package publisher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	cloudproviderapi "k8s.io/cloud-provider/api"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// reconcile makes one pass: write the addresses if they differ, then the annotations, then remove
// the taint if the addresses are right. A nil error means nothing is left to do for now.
func (p *Publisher) reconcile(ctx context.Context) error {
	node, desired, _ := p.snapshot()
	if desired == nil || node == nil {
		return nil // nothing resolved yet, or the Node does not exist: a later event wakes us
	}
	next := merge(node.Status.Addresses, desired.Managed, desired.Addresses)
	if addressesChanged(node, next) {
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
		if addressesChanged(node, next) {
			if err := p.writeAddresses(ctx, node, next, since, desired.Explanation); err != nil {
				return err
			}
			if node, _, _ = p.snapshot(); node == nil {
				return nil // deleted meanwhile
			}
		}
	} else {
		p.clearSince()
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

// reportNodeIP warns once per distinct problem with the provided node IP (worker only).
func (p *Publisher) reportNodeIP(node *corev1.Node, r resolver.NodeIPOutcome) {
	p.cfg.Metrics.providedNodeIP(len(r.Missing) > 0)
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
				"annotation", node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr])
			p.cfg.Recorder.Eventf(node, corev1.EventTypeWarning, ReasonProvidedNodeIPNotFound,
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

// addressesChanged reports whether writing next would change node's addresses (order included).
func addressesChanged(node *corev1.Node, next []corev1.NodeAddress) bool {
	return !slices.Equal(next, node.Status.Addresses)
}

func (p *Publisher) clearSince() {
	p.mu.Lock()
	p.since = time.Time{}
	p.mu.Unlock()
}
