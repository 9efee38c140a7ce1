package agent

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/resolver/discovery"
)

// newDiscovery builds the discoverer of cfg; its disagreements become Warning Events on the Node.
func (a *Agent) newDiscovery(cfg discovery.Config) *discovery.Discoverer {
	if cfg.Logger == nil {
		cfg.Logger = a.cfg.Loop.Logger
	}
	cfg.OnDisagreement = a.disagreement
	return discovery.New(cfg)
}

// disagreement emits the Warning Event about the Node, as the informer has it (its UID included,
// which the events admission policy checks); nothing in a dry run.
func (a *Agent) disagreement(f resolver.Family, reason string) {
	rec := a.cfg.Publisher.Recorder
	if rec == nil || a.node == nil {
		return
	}
	n := a.node.Node()
	if n == nil {
		return
	}
	msg := fmt.Sprintf("no %s ExternalIP from STUN, the last agreed one (if any) stays: %s", f, reason)
	rec.Event(n, corev1.EventTypeWarning, vocab.ReasonExternalIPDisagreement, vocab.EventMessage(msg))
}
