package app

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/resolver/discovery"
)

// ReasonExternalIPDisagreement is the Warning Event when the STUN servers see the node at
// different addresses (nothing is written).
const ReasonExternalIPDisagreement = "ExternalIPDisagreement"

// maxEventMessage keeps an Event under the admission policy's 1024-character bound.
const maxEventMessage = 1000

// newDiscovery builds the discoverer of cfg: its disagreements become Warning Events on the Node
// (the agent sets OnDisagreement; one given in cfg is replaced).
func (a *Agent) newDiscovery(cfg discovery.Config) *discovery.Discoverer {
	if cfg.Logger == nil {
		cfg.Logger = a.cfg.Loop.Logger
	}
	cfg.OnDisagreement = a.disagreement
	return discovery.New(cfg)
}

// disagreement emits the Warning Event about the Node, as the informer has it (its UID included,
// which the events admission policy checks). A dry run has no Node and no recorder: the log line
// discovery writes is all.
func (a *Agent) disagreement(f resolver.Family, reason string) {
	rec := a.cfg.Publisher.Recorder
	if rec == nil || a.informer == nil {
		return
	}
	o, ok, err := a.informer.GetStore().GetByKey(a.cfg.NodeName)
	if err != nil || !ok {
		return
	}
	msg := fmt.Sprintf("no %s ExternalIP from STUN, the last agreed one (if any) stays: %s", f, reason)
	if len(msg) > maxEventMessage {
		msg = msg[:maxEventMessage]
	}
	rec.Event(o.(*corev1.Node), corev1.EventTypeWarning, ReasonExternalIPDisagreement, msg)
}

// onceDiscovery is discovery for RunOnce: Update runs the rounds before it returns (no Run
// goroutine exists), so the state resolved next carries their answers.
type onceDiscovery struct {
	ctx context.Context
	d   *discovery.Discoverer
}

func (o onceDiscovery) Update(sources map[resolver.Family]netip.Addr) { o.d.Once(o.ctx, sources) }
func (o onceDiscovery) Mapped(f resolver.Family) (netip.Addr, bool)   { return o.d.Mapped(f) }
func (o onceDiscovery) C() <-chan struct{}                            { return o.d.C() }
func (o onceDiscovery) Covers(f resolver.Family) bool                 { return o.d.Covers(f) }
