package inspect

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// Each stale pod carries the remediator's verdict, from the decision the remediator acts on.
func TestStaleRemediation(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	n := *node("a", "InternalIP", "10.0.0.2")
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: vocab.FieldManager, Subresource: "status", Time: &metav1.Time{Time: now.Add(-20 * time.Second)}}}
	owned := func(name string, edit func(*corev1.Pod)) corev1.Pod {
		p := hostPod("ns", name, "a", corev1.PodRunning, "10.0.0.1")
		p.Labels = map[string]string{"app": name}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: name, Controller: new(true)}}
		if edit != nil {
			edit(&p)
		}
		return p
	}
	pods := []corev1.Pod{
		owned("ds", nil),
		owned("guarded", nil),
		owned("optout", func(p *corev1.Pod) {
			p.Annotations = map[string]string{vocab.RemediationAnnotation: vocab.RemediationDisabled}
		}),
	}
	pdb := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}
	for _, tc := range []struct {
		name string
		r    Remediation
		want map[string][2]string // pod → remediation, fix
	}{
		{"no remediator", Remediation{}, map[string][2]string{
			"ds": {"not evicted (Off): no remediator runs (deploy/components/pod-remediation); delete the pod: kubectl -n ns delete pod ds", "kubectl -n ns delete pod ds"},
		}},
		{"a remediator, grace 1m", Remediation{Enabled: true, Grace: time.Minute, PDBs: []policyv1.PodDisruptionBudget{pdb}}, map[string][2]string{
			"ds":      {"will be evicted at 2026-12-06T03:00:40Z (in 40s)", "none: the remediator evicts it at 2026-12-06T03:00:40Z"},
			"guarded": {"will be evicted at 2026-12-06T03:00:40Z (in 40s)", "none: the remediator evicts it at 2026-12-06T03:00:40Z"},
			"optout":  {"not evicted (OptedOut): opted out (nodeaddr.io/remediation=disabled); delete it when it may restart: kubectl -n ns delete pod optout", "kubectl -n ns delete pod optout"},
		}},
		{"a remediator, grace over", Remediation{Enabled: true, Grace: 10 * time.Second, PDBs: []policyv1.PodDisruptionBudget{pdb}}, map[string][2]string{
			"ds":      {"evicting now", "none: the remediator evicts it now"},
			"guarded": {"eviction refused, retried with backoff: PodDisruptionBudget ns/b allows no disruption", "kubectl -n ns delete pod guarded"},
		}},
		{"unknown", Remediation{Unknown: "list deployments: forbidden"}, map[string][2]string{
			"ds": {"unknown: list deployments: forbidden", "kubectl -n ns delete pod ds"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found := Stale(Snapshot{Nodes: []corev1.Node{n}, Pods: pods, Now: now, Remediation: tc.r})
			for _, f := range found {
				want, ok := tc.want[f.Name]
				if !ok {
					continue
				}
				if f.Remediation != want[0] || f.Fix != want[1] {
					t.Errorf("%s: remediation %q fix %q\nwant remediation %q fix %q", f.Name, f.Remediation, f.Fix, want[0], want[1])
				}
			}
		})
	}
}
