package main

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeaddr/nodeaddr/internal/inspect"
	"github.com/nodeaddr/nodeaddr/internal/remediation/verdict"
)

// remediatorSelector selects the remediator's Deployment (deploy/components/pod-remediation, the chart).
const remediatorSelector = "app.kubernetes.io/name=nodeaddr-remediator"

// remediationFacts reads, when a hostNetwork pod is stale, whether a remediator is installed (a
// Deployment running `nodeaddr remediator`) with its --grace, and the PodDisruptionBudgets; what
// cannot be read makes the verdict unknown.
func remediationFacts(ctx context.Context, cs kubernetes.Interface, snap *inspect.Snapshot) {
	r := &snap.Remediation
	stale := false
	nodes := map[string]int{}
	for i, n := range snap.Nodes {
		nodes[n.Name] = i
	}
	for i := range snap.Pods {
		if j, ok := nodes[snap.Pods[i].Spec.NodeName]; ok && len(verdict.StaleIPs(&snap.Pods[i], &snap.Nodes[j])) > 0 {
			stale = true
			break
		}
	}
	if !stale {
		return
	}
	deps, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: remediatorSelector})
	if err != nil {
		r.Unknown = fmt.Sprintf("list deployments: %v", err)
		return
	}
	for _, d := range deps.Items {
		for _, c := range d.Spec.Template.Spec.Containers {
			args := slices.Concat(c.Command, c.Args)
			i := slices.Index(args, "remediator")
			if i < 0 {
				continue
			}
			grace, err := verdict.RemediatorGrace(args[i+1:])
			if err != nil {
				r.Unknown = fmt.Sprintf("the flags of deployment %s/%s: %v", d.Namespace, d.Name, err)
				return
			}
			r.Enabled, r.Grace = true, grace
		}
	}
	if !r.Enabled {
		return
	}
	pdbs, err := cs.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		r.Unknown = fmt.Sprintf("list poddisruptionbudgets: %v", err)
		return
	}
	r.PDBs = pdbs.Items
}
