package remediation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeaddr/nodeaddr/internal/remediation/verdict"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// state is what the remediator remembers between decisions, under Controller.mu.
type state struct {
	changed  map[string]time.Time       // Node → when the informer saw its addresses change
	history  map[string]verdict.History // Node → its InternalIP/ExternalIP sets the informer saw
	refused  map[types.UID]refusal      // pod → its last refused eviction
	inFlight map[types.UID]flight       // evicted pods not gone yet
	reported map[types.UID]string       // pod → the reason last reported in an Event
	stale    map[types.UID]staleInfo    // every stale pod, for the gauges
	waiting  map[string]struct{}        // Nodes whose evictions wait for a cluster-wide slot
}

type refusal struct {
	retryAt time.Time
	n       int
	message string
}

type flight struct {
	node string
	at   time.Time
}

type staleInfo struct {
	node, reason string
	since        time.Time
}

func newState() state {
	return state{changed: map[string]time.Time{}, history: map[string]verdict.History{}, refused: map[types.UID]refusal{}, inFlight: map[types.UID]flight{},
		reported: map[types.UID]string{}, stale: map[types.UID]staleInfo{}, waiting: map[string]struct{}{}}
}

// podGone forgets a pod; it returns the Nodes to examine again when it freed a slot.
func (c *Controller) podGone(uid types.UID) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, freed := c.inFlight[uid]
	delete(c.inFlight, uid)
	delete(c.refused, uid)
	delete(c.reported, uid)
	delete(c.stale, uid)
	c.setGauges()
	if !freed {
		return nil
	}
	out := make([]string, 0, len(c.waiting))
	for n := range c.waiting {
		out = append(out, n)
	}
	clear(c.waiting)
	return out
}

// changedAt is when node's addresses last changed: what the informer saw, or the agent's last
// write of the Node's status, whichever is later; the controller's start when neither is known.
func (c *Controller) changedAt(n *corev1.Node) time.Time {
	t := c.changed[n.Name]
	if w, ok := verdict.AddressesChanged(n); ok && w.After(t) {
		t = w
	}
	if t.IsZero() {
		return c.start
	}
	return t
}

// Sync decides on the hostNetwork pods of node and evicts those verdict.Decide says to, within the
// bounds; it comes back to the Node when the next grace or retry ends.
func (c *Controller) Sync(ctx context.Context, node string) error {
	var n *corev1.Node
	if o, ok, _ := c.nodes.GetIndexer().GetByKey(node); ok {
		n, _ = o.(*corev1.Node)
	}
	objs, err := c.pods.GetIndexer().ByIndex(byNode, node)
	if err != nil {
		return err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	var next time.Time
	var errs []error
	for _, p := range pods {
		v := c.decide(p, n)
		switch v.Reason {
		case verdict.Evict:
			errs = append(errs, c.evict(ctx, p, v))
		case verdict.Grace, verdict.PDBBlocked:
			if next.IsZero() || v.At.Before(next) {
				next = v.At
			}
		case verdict.StaticPod, verdict.NoController, verdict.OptedOut:
			c.reportOnce(p, v)
		}
	}
	if !next.IsZero() {
		c.queue.AddAfter(node, next.Sub(c.cfg.Now()))
	}
	c.mu.Lock()
	c.setGauges()
	c.mu.Unlock()
	return errors.Join(errs...)
}

// decide is verdict.Decide on p with what the controller remembers, recorded for the gauges.
func (c *Controller) decide(p *corev1.Pod, n *corev1.Node) verdict.Verdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := verdict.Input{Pod: p, Node: n, Now: c.cfg.Now(), Grace: c.cfg.Grace, Enabled: true}
	if n != nil {
		in.Changed = c.changedAt(n)
		if h, ok := c.history[n.Name]; ok {
			in.History = &h
		}
	}
	if r, ok := c.refused[p.UID]; ok {
		in.RetryAt, in.Refusal = r.retryAt, r.message
	}
	v := verdict.Decide(in)
	if _, evicted := c.inFlight[p.UID]; evicted && v.Reason == verdict.Evict {
		// Evicted, its deletion not in the cache yet: never evicted twice.
		v.Reason, v.At, v.Message = verdict.Terminating, time.Time{}, "evicted; its deletion is not seen yet"
	}
	if v.Stale {
		c.stale[p.UID] = staleInfo{node: p.Spec.NodeName, reason: v.Reason, since: in.Changed}
	} else {
		delete(c.stale, p.UID)
		delete(c.refused, p.UID)
	}
	return v
}

// acquire takes an eviction slot on node, within both bounds; false when none is free (the Node
// is examined again when a slot frees).
func (c *Controller) acquire(node string, uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	total, here := 0, 0
	for _, f := range c.inFlight {
		if now.Sub(f.at) > c.cfg.InFlightTimeout {
			continue
		}
		total++
		if f.node == node {
			here++
		}
	}
	if here >= c.cfg.MaxPerNode {
		return false // this Node's own eviction frees the slot and queues it
	}
	if total >= c.cfg.MaxInFlight {
		c.waiting[node] = struct{}{}
		return false
	}
	c.inFlight[uid] = flight{node: node, at: now}
	return true
}

// evict posts the Eviction of p within the bounds, and reports the result.
func (c *Controller) evict(ctx context.Context, p *corev1.Pod, v verdict.Verdict) error {
	node := p.Spec.NodeName
	if !c.acquire(node, p.UID) {
		c.cfg.Logger.Debug("stale pod waits for an eviction slot", "node", node, "pod", p.Namespace+"/"+p.Name)
		return nil
	}
	err := c.cfg.Source.Evict(ctx, p)
	switch {
	case err == nil:
		c.mu.Lock()
		delete(c.refused, p.UID)
		c.mu.Unlock()
		c.cfg.Metrics.evictions.WithLabelValues(ResultEvicted).Inc()
		c.cfg.Logger.Info("stale hostNetwork pod evicted", "node", node, "pod", p.Namespace+"/"+p.Name, "address", strings.Join(v.Old, ","), "renumbered", v.Renumbered)
		c.cfg.Recorder.Eventf(nodeRef(node), corev1.EventTypeNormal, vocab.ReasonStalePodEvicted, "%s", vocab.EventMessage(
			fmt.Sprintf("Evicted pod %s/%s: %s", p.Namespace, p.Name, v.Cause)))
		return nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		c.release(p.UID) // gone, or replaced (the UID precondition)
		return nil
	case apierrors.IsTooManyRequests(err):
		c.release(p.UID)
		r := c.refuse(p.UID, err.Error())
		c.cfg.Metrics.evictions.WithLabelValues(ResultBlocked).Inc()
		c.cfg.Logger.Warn("eviction of a stale pod refused, retrying", "node", node, "pod", p.Namespace+"/"+p.Name, "retry_at", r.retryAt, "err", err)
		c.cfg.Recorder.Eventf(nodeRef(node), corev1.EventTypeWarning, vocab.ReasonStalePodEvictionBlocked, "%s", vocab.EventMessage(
			fmt.Sprintf("Eviction of pod %s/%s (on old address %v) refused, retried with backoff, never forced: %v", p.Namespace, p.Name, v.Old, err)))
		c.queue.AddAfter(node, r.retryAt.Sub(c.cfg.Now()))
		return nil
	}
	c.release(p.UID)
	c.cfg.Metrics.evictions.WithLabelValues(ResultFailed).Inc()
	return fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err)
}

func (c *Controller) release(uid types.UID) {
	c.mu.Lock()
	delete(c.inFlight, uid)
	c.mu.Unlock()
}

// refuse records a refused eviction: the next attempt after Backoff, doubled per refusal up to
// MaxBackoff, jittered by up to +50% so that pods refused together are not retried together.
func (c *Controller) refuse(uid types.UID, msg string) refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.refused[uid]
	d := c.cfg.Backoff << min(r.n, 20)
	d = min(d, c.cfg.MaxBackoff)
	d += time.Duration(rand.Int64N(int64(d)/2 + 1)) //nolint:gosec // jitter, not a secret
	r.n++
	r.retryAt, r.message = c.cfg.Now().Add(d), msg
	c.refused[uid] = r
	if s, ok := c.stale[uid]; ok {
		s.reason = verdict.PDBBlocked
		c.stale[uid] = s
		c.setGauges()
	}
	return r
}

// reportOnce records an Event on the pod's Node, once per pod and reason, for a stale pod the
// remediator will not evict.
func (c *Controller) reportOnce(p *corev1.Pod, v verdict.Verdict) {
	c.mu.Lock()
	seen := c.reported[p.UID] == v.Reason
	c.reported[p.UID] = v.Reason
	c.mu.Unlock()
	if seen {
		return
	}
	c.cfg.Metrics.evictions.WithLabelValues(ResultRefused).Inc()
	c.cfg.Logger.Warn("stale hostNetwork pod not evicted", "node", p.Spec.NodeName, "pod", p.Namespace+"/"+p.Name, "reason", v.Reason, "message", v.Message)
	c.cfg.Recorder.Eventf(nodeRef(p.Spec.NodeName), corev1.EventTypeWarning, vocab.ReasonStalePodNotEvicted, "%s", vocab.EventMessage(
		fmt.Sprintf("Pod %s/%s keeps old address %v, not evicted (%s): %s", p.Namespace, p.Name, v.Old, v.Reason, v.Message)))
}

// setGauges recounts the stale pods by reason (under c.mu).
func (c *Controller) setGauges() {
	counts := map[string]float64{}
	for _, s := range c.stale {
		counts[s.reason]++
	}
	for _, r := range verdict.Reasons() {
		c.cfg.Metrics.stale.WithLabelValues(r).Set(counts[r])
	}
}

// oldestStale is how long the oldest stale pod has been stale, in seconds (0: none).
func (c *Controller) oldestStale() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var oldest time.Time
	for _, s := range c.stale {
		if oldest.IsZero() || s.since.Before(oldest) {
			oldest = s.since
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return c.cfg.Now().Sub(oldest).Seconds()
}
