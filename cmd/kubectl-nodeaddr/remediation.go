package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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
			r.Enabled, r.Grace = true, remediatorGrace(args[i+1:])
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

// remediatorGrace is the --grace of a remediator's arguments: the last one given (`--grace=D` or
// `--grace D`), as the remediator's flag parsing takes the last (an overlay appends its own after
// the base's); the default when absent or invalid (the remediator then refuses to start, which its
// Deployment shows).
func remediatorGrace(args []string) time.Duration {
	v, found := "", false
	for i, a := range args {
		if s, ok := strings.CutPrefix(a, "--grace="); ok {
			v, found = s, true
		} else if a == "--grace" && i+1 < len(args) {
			v, found = args[i+1], true
		}
	}
	if d, err := time.ParseDuration(v); found && err == nil && d > 0 {
		return d
	}
	return verdict.DefaultGrace
}
