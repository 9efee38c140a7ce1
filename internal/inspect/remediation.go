package inspect

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodeaddr/nodeaddr/internal/remediation/verdict"
)

// Remediation is what `kubectl nodeaddr stale` knows of the remediator (`nodeaddr remediator`):
// whether one is installed and its --grace, read from its Deployment, and the PodDisruptionBudgets,
// which stand for what the remediator learns from a refused eviction.
type Remediation struct {
	Enabled bool
	Grace   time.Duration
	PDBs    []policyv1.PodDisruptionBudget
	// Unknown says what could not be read ("" when everything was): then no verdict is given.
	Unknown string
}

// remediate sets, on each stale pod's finding, the remediator's verdict (verdict.Decide, the
// decision the remediator acts on) and, when it will evict the pod, that as the fix.
func remediate(s Snapshot, found []Finding) {
	nodes := map[string]*corev1.Node{}
	for i := range s.Nodes {
		nodes[s.Nodes[i].Name] = &s.Nodes[i]
	}
	pods := map[string]*corev1.Pod{}
	for i := range s.Pods {
		pods[s.Pods[i].Namespace+"/"+s.Pods[i].Name] = &s.Pods[i]
	}
	for i := range found {
		f := &found[i]
		p := pods[f.Namespace+"/"+f.Name]
		if f.Kind != KindPod || p == nil {
			continue
		}
		if s.Remediation.Unknown != "" {
			f.Remediation = "unknown: " + s.Remediation.Unknown
			continue
		}
		n := nodes[p.Spec.NodeName]
		in := verdict.Input{Pod: p, Node: n, Now: s.Now, Grace: s.Remediation.Grace, Enabled: s.Remediation.Enabled,
			Refusal: blockingBudget(p, s.Remediation.PDBs)}
		if t, ok := verdict.AddressesChanged(n); ok {
			in.Changed = t
		}
		v := verdict.Decide(in)
		f.Remediation = v.Describe(s.Now)
		switch v.Reason {
		case verdict.Evict:
			f.Fix = "none: the remediator evicts it now"
		case verdict.Grace:
			f.Fix = "none: the remediator evicts it at " + v.At.UTC().Format(time.RFC3339)
		case verdict.Terminating:
			f.Fix = "none: being deleted"
		}
	}
}

// blockingBudget names a PodDisruptionBudget of p's namespace that selects p and allows no
// disruption now ("" when none does).
func blockingBudget(p *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) string {
	for _, b := range pdbs {
		if b.Namespace != p.Namespace || b.Spec.Selector == nil || b.Status.DisruptionsAllowed > 0 {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels)) {
			return fmt.Sprintf("PodDisruptionBudget %s/%s allows no disruption", b.Namespace, b.Name)
		}
	}
	return ""
}
