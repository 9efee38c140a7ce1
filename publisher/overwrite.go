package publisher

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// overwrite describes another writer's change of the managed addresses, for the caller to report.
type overwrite struct {
	node         *corev1.Node
	writer       string
	ours, theirs []corev1.NodeAddress
	delay        time.Duration // before nodeaddr rewrites them (revertBackoff)
}

// overwriteDetector counts one overwrite per address write of ours: the first Node delivered after
// our write's resourceVersion whose managed addresses differ from ours. Not safe for concurrent use.
type overwriteDetector struct {
	managed      []resolver.AddressType
	fieldManager string
	fight        revertBackoff

	written  []corev1.NodeAddress // managed entries of our last write; nil: none yet
	writeRV  string
	caughtUp bool // the informer has delivered writeRV
	reverted bool // the overwrite of this write was reported
	// inflight is the managed list of the write under way (or timed out): its echo is ours.
	inflight []corev1.NodeAddress
}

// writing records the managed addresses of an address write about to be sent.
func (d *overwriteDetector) writing(next []corev1.NodeAddress) {
	d.inflight = managedOnly(next, d.managed)
}

// wrote records a successful address write and the Node it produced.
func (d *overwriteDetector) wrote(res *corev1.Node) {
	if d.inflight == nil && d.caughtUp && d.writeRV == res.ResourceVersion {
		// The informer delivered this write before its response arrived, and perhaps another
		// writer's change after it: observe has already taken it over.
		return
	}
	d.written, d.writeRV = managedOnly(res.Status.Addresses, d.managed), res.ResourceVersion
	d.inflight, d.caughtUp, d.reverted = nil, false, false
}

// observe takes a Node from the informer, in order, and returns the overwrite it shows, if any.
func (d *overwriteDetector) observe(n *corev1.Node, now time.Time) *overwrite {
	got := managedOnly(n.Status.Addresses, d.managed)
	if d.inflight != nil && slices.Equal(got, d.inflight) {
		// The echo of our write, arriving before its response, or of one that failed on our side
		// although the API server applied it: it is what we wrote.
		d.written, d.writeRV, d.inflight, d.caughtUp, d.reverted = got, n.ResourceVersion, nil, true, false
		return nil
	}
	if d.written == nil || d.reverted {
		return nil
	}
	if !d.caughtUp {
		if n.ResourceVersion != d.writeRV {
			return nil // an older state, delivered before our write
		}
		d.caughtUp = true
	}
	if slices.Equal(got, d.written) {
		return nil
	}
	d.reverted = true
	return &overwrite{node: n, writer: lastStatusWriter(n, d.fieldManager), ours: d.written, theirs: got,
		delay: d.fight.Revert(now)}
}

// forget starts over (the Node was deleted).
func (d *overwriteDetector) forget() {
	d.written, d.writeRV, d.inflight, d.caughtUp, d.reverted = nil, "", nil, false, false
}

// lastStatusWriter names the most recent other manager of status fields, from managedFields.
func lastStatusWriter(n *corev1.Node, self string) string {
	var who string
	var at time.Time
	for _, m := range n.ManagedFields {
		if m.Manager == self || m.Subresource != "status" {
			continue
		}
		if m.Time != nil && !m.Time.Time.Before(at) {
			who, at = m.Manager, m.Time.Time
		}
	}
	if who == "" {
		return "another writer"
	}
	return who
}

// revertBackoff decides how long to wait before rewriting addresses that another writer reverted
// (a kubelet without --cloud-provider=external rewrites them every 10 s). After Threshold reverts
// within Window, each revert doubles the delay from Base up to Max; after a quiet Window (or twice
// the delay) it starts from scratch.
type revertBackoff struct {
	Threshold int
	Window    time.Duration
	Base, Max time.Duration

	reverts []time.Time
	delay   time.Duration
}

// Revert records a revert at now and returns the delay before the next rewrite (0: at once).
func (b *revertBackoff) Revert(now time.Time) time.Duration {
	if n := len(b.reverts); n > 0 && now.Sub(b.reverts[n-1]) > max(b.Window, 2*b.delay) {
		b.reverts, b.delay = b.reverts[:0], 0
	}
	b.reverts = append(slices.DeleteFunc(b.reverts, func(t time.Time) bool {
		return b.delay == 0 && now.Sub(t) > b.Window
	}), now)
	if len(b.reverts) > b.Threshold*4 {
		b.reverts = b.reverts[len(b.reverts)-b.Threshold*4:]
	}
	if len(b.reverts) >= b.Threshold {
		if b.delay == 0 {
			b.delay = b.Base
		} else {
			b.delay = min(2*b.delay, b.Max)
		}
	}
	return b.delay
}

// NotBefore is the earliest time the next rewrite may happen (zero time: no restriction): the
// delay after the last revert.
func (b *revertBackoff) NotBefore() time.Time {
	if b.delay == 0 {
		return time.Time{}
	}
	return b.reverts[len(b.reverts)-1].Add(b.delay)
}
