package agent

import (
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// newCSRApproval builds the kubelet-serving CSR approver (--approve-kubelet-serving-csr) on the
// agent's own state: the addresses the publisher publishes from the agent's own resolution (never
// status.addresses, which the kubelet may write itself) and the Node informer's view for its DNS
// names. The Node's creation and each change of its addresses open the approver's watch window (the
// kubelet files its CSR about a second after it sees them, whoever wrote them), and each change of
// the Node re-examines the Node's pending CSRs.
func (a *Agent) newCSRApproval() error {
	if a.cfg.CSRApproval == nil || a.pub == nil {
		return nil
	}
	cfg := *a.cfg.CSRApproval
	cfg.Node = a.cfg.NodeName
	cfg.Own = a.ownAddresses
	ap, err := csrapproval.New(cfg)
	if err != nil {
		return fmt.Errorf("kubelet serving csr approver: %w", err)
	}
	a.csr = ap
	if _, err := a.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) {
			ap.Open("node-added")
			ap.NodeChanged()
		},
		UpdateFunc: func(old, o any) {
			before, _ := old.(*corev1.Node)
			after, _ := o.(*corev1.Node)
			ap.NodeUpdated(before, after)
		},
	}); err != nil {
		return fmt.Errorf("add the approver's node event handler: %w", err)
	}
	return nil
}

// csrSink hands each resolved state to the publisher, then lets the approver re-examine the
// Node's pending CSRs: a state that needs no Node write (an agent restarted with the addresses
// already on the Node) changes no Node, so the Node's events alone would not say that the addresses
// nodeaddr publishes are now known.
type csrSink struct {
	resolver.Sink
	approver *csrapproval.Approver
}

func (s csrSink) Publish(st resolver.State, since time.Time) {
	s.Sink.Publish(st, since)
	s.approver.NodeChanged()
}

// ownAddresses is csrapproval.Own: the IPs of the publisher's desired addresses and the Node.
func (a *Agent) ownAddresses() ([]netip.Addr, *corev1.Node) {
	var ips []netip.Addr
	for _, addr := range a.pub.DesiredAddresses() {
		ips = append(ips, addr.IP)
	}
	return ips, a.node.Node()
}
