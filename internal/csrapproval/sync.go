package csrapproval

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/publisher/identity"
)

// ClusterReader reads what no agent may vouch for: the other Nodes' addresses and the API server's.
// Both are read (from the API server's watch cache, resourceVersion 0) only when a CSR of the
// agent's own Node needs deciding, so an agent holds no cache of every Node.
type ClusterReader interface {
	ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	// ListEndpointSlices lists EndpointSlices in namespace.
	ListEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error)
}

// The API server's endpoints: the EndpointSlices of the `kubernetes` Service in `default`.
const (
	apiServerNamespace = "default"
	apiServerSelector  = discoveryv1.LabelServiceName + "=kubernetes"
)

// sync decides on the CSR called name as it is now, and approves it or reports why not (once).
func (a *Approver) sync(ctx context.Context, name string) error {
	a.mu.Lock()
	csr, exists := a.csrs[name]
	a.mu.Unlock()
	if !exists {
		return nil
	}
	if !Decide(csr, Facts{Node: a.cfg.Node}).Ours {
		return nil
	}
	f, node, err := a.facts(ctx)
	if err != nil {
		return err
	}
	v := Decide(csr, f)
	if !v.Ours {
		return nil
	}
	if !v.Approve {
		a.mu.Lock()
		a.decidedOn[csr.Name] = f.own()
		a.mu.Unlock()
		a.reportPending(csr, node, v)
		return nil
	}
	return a.approve(ctx, csr, node, f)
}

// facts gathers the Facts: the agent's own state, then the other Nodes and the API server.
func (a *Approver) facts(ctx context.Context) (Facts, *corev1.Node, error) {
	f := Facts{Node: a.cfg.Node}
	published, node := a.cfg.Own()
	for _, ip := range published {
		f.Published = append(f.Published, ip.Unmap())
	}
	if node != nil {
		f.DNSNames = dnsNames(node.Status.Addresses)
	}
	nodes, err := a.cfg.Cluster.ListNodes(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return Facts{}, nil, fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if n.Name != a.cfg.Node {
			f.OtherNodes = append(f.OtherNodes, ips(n.Status.Addresses)...)
		}
	}
	eps, err := a.cfg.Cluster.ListEndpointSlices(ctx, apiServerNamespace,
		metav1.ListOptions{LabelSelector: apiServerSelector, ResourceVersion: "0"})
	if err != nil {
		return Facts{}, nil, fmt.Errorf("list the kubernetes service's endpointslices: %w", err)
	}
	for _, s := range eps.Items {
		for _, ep := range s.Endpoints {
			for _, raw := range ep.Addresses {
				if ip, err := netip.ParseAddr(raw); err == nil {
					f.APIServer = append(f.APIServer, ip.Unmap())
				}
			}
		}
	}
	return f, node, nil
}

// dnsNames are the Node's Hostname, InternalDNS and ExternalDNS entries.
func dnsNames(addrs []corev1.NodeAddress) []string {
	var out []string
	for _, a := range addrs {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			out = append(out, a.Address)
		}
	}
	return out
}

// ips are the IP addresses among a Node's addresses, of any type.
func ips(addrs []corev1.NodeAddress) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// approve adds the Approved condition, naming what was checked.
func (a *Approver) approve(ctx context.Context, csr *certv1.CertificateSigningRequest, node *corev1.Node, f Facts) error {
	msg := fmt.Sprintf("nodeaddr on node %s: every IP SAN is an address it publishes for the Node %v, every DNS SAN one of the Node's names %v; none is another Node's or the API server's",
		a.cfg.Node, f.Published, f.DNSNames)
	c := csr.DeepCopy()
	c.Status.Conditions = append(c.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: certv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: ApprovalReason, Message: msg, LastUpdateTime: metav1.NewTime(a.cfg.Now()),
	})
	updated, err := a.cfg.CSRs.UpdateApproval(ctx, c.Name, c, metav1.UpdateOptions{FieldManager: identity.FieldManager})
	switch {
	case apierrors.IsNotFound(err):
		a.mu.Lock()
		a.forget(c.Name)
		a.mu.Unlock()
		return nil
	case apierrors.IsConflict(err):
		// Changed since it was read (decided by someone else?): the watch, or the next LIST, brings
		// it again.
		a.cfg.Logger.Debug("kubelet serving CSR changed before its approval", "node", a.cfg.Node, "csr", c.Name)
		return nil
	case err != nil:
		return fmt.Errorf("approve csr %s: %w", c.Name, err)
	}
	a.mu.Lock()
	if _, ok := a.csrs[c.Name]; ok && updated != nil && updated.Name == c.Name {
		a.csrs[c.Name] = updated
	}
	a.mu.Unlock()
	a.wake() // the window may settle
	latency := a.cfg.Now().Sub(csr.CreationTimestamp.Time)
	a.cfg.Observer.OnCSRApproved(latency)
	a.cfg.Logger.Info("kubelet serving CSR approved", "node", a.cfg.Node, "csr", csr.Name,
		"addresses", fmt.Sprint(f.Published), "latency", latency)
	if node != nil {
		a.cfg.Recorder.Eventf(node, corev1.EventTypeNormal, EventApproved, "%s", bounded(
			fmt.Sprintf("Kubelet serving CSR %s approved: IP SANs among the published addresses %v", csr.Name, f.Published)))
	}
	return nil
}

// reportPending says once per CSR why it is left pending.
func (a *Approver) reportPending(csr *certv1.CertificateSigningRequest, node *corev1.Node, v Verdict) {
	a.mu.Lock()
	seen := a.reported[csr.Name]
	a.reported[csr.Name] = true
	a.mu.Unlock()
	if seen {
		return
	}
	a.cfg.Observer.OnCSRPending(v.Reason)
	a.cfg.Logger.Warn("kubelet serving CSR left pending", "node", a.cfg.Node, "csr", csr.Name, "reason", v.Reason, "message", v.Message)
	if node != nil {
		a.cfg.Recorder.Eventf(node, corev1.EventTypeWarning, EventPending, "%s", bounded(
			fmt.Sprintf("Kubelet serving CSR %s left pending (%s): %s", csr.Name, v.Reason, v.Message)))
	}
}

// bounded keeps an Event message within the 1024 characters the admission policy allows.
func bounded(s string) string {
	const limit = 1024
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit-3], "") + "..."
}
