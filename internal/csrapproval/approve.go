package csrapproval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// A node's pass: the decision on its pending CSRs, the facts from the caches, the approval and the
// pending report.

// Sync decides on the pending kubelet-serving CSRs of node, newest first, at most
// MaxPendingPerNode of them: approves those that pass and reports once why the others do not.
func (c *Controller) Sync(ctx context.Context, node string) error {
	objs, err := c.csrs.GetIndexer().ByIndex(byNode, node)
	if err != nil {
		return err
	}
	var pending []*certv1.CertificateSigningRequest
	c.mu.Lock()
	for _, o := range objs {
		csr, ok := o.(*certv1.CertificateSigningRequest)
		if !ok || !rules.Pending(csr) {
			continue
		}
		if rv, done := c.approved[csr.Name]; !done || rv != csr.ResourceVersion {
			pending = append(pending, csr)
		}
	}
	// CSRs not yet decided come first, newest first: a flood the approver already refused cannot
	// hide a new CSR, not even one filed in the same second (creationTimestamp has whole seconds).
	undecided := func(csr *certv1.CertificateSigningRequest) bool { _, ok := c.reported[csr.Name]; return !ok }
	slices.SortFunc(pending, func(a, b *certv1.CertificateSigningRequest) int {
		if ua, ub := undecided(a), undecided(b); ua != ub {
			if ua {
				return -1
			}
			return 1
		}
		return newestFirst(a, b)
	})
	// Only undecided CSRs beyond this pass need another pass: those already reported wait for a
	// change of the facts (a Node or CSR event queues the node) or the resync.
	more := len(pending) > c.cfg.Policy.MaxPendingPerNode && undecided(pending[c.cfg.Policy.MaxPendingPerNode])
	c.mu.Unlock()
	if len(pending) > c.cfg.Policy.MaxPendingPerNode {
		c.cfg.Logger.Debug("pending kubelet serving CSRs of a node left for the next pass", "node", node,
			"pending", len(pending), "decided", c.cfg.Policy.MaxPendingPerNode)
		pending = pending[:c.cfg.Policy.MaxPendingPerNode]
		if more {
			defer c.queue.AddAfter(node, nextPass) // the rest, after the other nodes' turns
		}
	}
	if len(pending) == 0 {
		return nil
	}
	f := c.Facts(node)
	var errs []error
	for _, csr := range pending {
		v := rules.Decide(csr, f)
		if !v.Approve {
			c.reportPending(csr, node, v)
			continue
		}
		errs = append(errs, c.approve(ctx, csr, node, f))
	}
	return errors.Join(errs...)
}

// nextPass is how soon a node with more pending CSRs than a pass decides gets its next pass.
const nextPass = time.Second

// newestFirst orders CSRs by creation, newest first (then by name, for a stable order).
func newestFirst(a, b *certv1.CertificateSigningRequest) int {
	return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), strings.Compare(b.Name, a.Name))
}

// Facts gathers what rules.Decide needs about node from the informers' caches, with the Service
// network of --service-cidr.
func (c *Controller) Facts(node string) rules.Facts {
	cl := rules.Cluster{Nodes: c.nodes.GetIndexer(), Services: typed[corev1.Service](c.services),
		EndpointSlices: typed[discoveryv1.EndpointSlice](c.slices)}
	if c.cidrs != nil {
		cl.ServiceCIDRs = typed[networkingv1.ServiceCIDR](c.cidrs)
	}
	f := rules.FactsFrom(node, cl, c.cfg.Policy)
	f.ServiceCIDRs = append(slices.Clone(c.cfg.ServiceCIDRs), f.ServiceCIDRs...)
	return f
}

// typed is what an informer's store holds, as *T.
func typed[T any](inf cache.SharedIndexInformer) []*T {
	var out []*T
	for _, o := range inf.GetStore().List() {
		if t, ok := o.(*T); ok {
			out = append(out, t)
		}
	}
	return out
}

// nodeRef is the Node the approver's Events are about (it may not exist yet).
func nodeRef(node string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)}
}

// approve adds the Approved condition, naming what was checked.
func (c *Controller) approve(ctx context.Context, csr *certv1.CertificateSigningRequest, node string, f rules.Facts) error {
	msg := fmt.Sprintf("nodeaddr-approver: every IP SAN is an address nodeaddr published for Node %s %v, every DNS SAN the node's name; none is another Node's, the API server's or in the Service network",
		node, f.Published)
	u := csr.DeepCopy()
	u.Status.Conditions = append(u.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: certv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: vocab.ApprovalReason, Message: msg, LastUpdateTime: metav1.NewTime(c.cfg.Now()),
	})
	err := c.cfg.Source.Approve(ctx, u)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// Changed since the informer saw it: its update event queues the node again.
		c.cfg.Logger.Debug("kubelet serving CSR changed before its approval", "node", node, "csr", u.Name)
		return nil
	case err != nil:
		return fmt.Errorf("approve csr %s: %w", u.Name, err)
	}
	c.mu.Lock()
	delete(c.reported, u.Name)
	c.approved[u.Name] = csr.ResourceVersion // until the informer's update forgets it
	c.mu.Unlock()
	latency := c.cfg.Now().Sub(csr.CreationTimestamp.Time)
	c.cfg.Metrics.approvedTotal.Inc()
	c.cfg.Metrics.latency.Observe(latency.Seconds())
	c.cfg.Logger.Info("kubelet serving CSR approved", "node", node, "csr", csr.Name,
		"addresses", fmt.Sprint(f.Published), "latency", latency)
	c.cfg.Recorder.Eventf(nodeRef(node), corev1.EventTypeNormal, vocab.ReasonCSRApproved, "%s", vocab.EventMessage(
		fmt.Sprintf("Kubelet serving CSR %s approved: IP SANs among the addresses nodeaddr published %v", csr.Name, f.Published)))
	return nil
}

// reportPending says once per CSR and reason why it is left pending.
func (c *Controller) reportPending(csr *certv1.CertificateSigningRequest, node string, v rules.Verdict) {
	c.mu.Lock()
	seen := c.reported[csr.Name] == v.Reason
	c.reported[csr.Name] = v.Reason
	c.mu.Unlock()
	if seen {
		return
	}
	c.cfg.Metrics.pendingTotal.WithLabelValues(v.Reason).Inc()
	c.cfg.Logger.Warn("kubelet serving CSR left pending", "node", node, "csr", csr.Name, "reason", v.Reason, "message", v.Message)
	c.cfg.Recorder.Eventf(nodeRef(node), corev1.EventTypeWarning, vocab.ReasonCSRPending, "%s", vocab.EventMessage(
		fmt.Sprintf("Kubelet serving CSR %s left pending (%s): %s", csr.Name, v.Reason, v.Message)))
}
