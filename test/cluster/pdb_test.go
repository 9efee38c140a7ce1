package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// guarded is a hostNetwork workload on node B behind a PodDisruptionBudget with maxUnavailable: 0
// (as a single-replica ingress controller an operator protects): every renumbering leaves its pod
// stale, and the remediator must never evict it, only report it (the Eviction API refuses with
// 429, which the remediator retries with backoff and never bypasses). The pod runs the sandbox
// image (it serves nothing: hostweb holds node B's port 8080).
const guarded = "guarded"

// startGuarded creates the guarded Deployment and its PodDisruptionBudget and returns the running
// pod once kube-controller-manager's disruption controller says the budget allows no disruption.
func (w *cluster) startGuarded() *corev1.Pod {
	t := w.t
	t.Helper()
	ctx, cs := context.Background(), w.c.CP.Admin
	one, labels := int32(1), map[string]string{"app": guarded}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: guarded, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeName: nodeB, HostNetwork: true,
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "pause", Image: harness.PauseImage, ImagePullPolicy: corev1.PullNever}},
			}}}}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	zero := intstr.FromInt32(0)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: guarded, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var p *corev1.Pod
	harness.Eventually(t, 3*time.Minute, 200*time.Millisecond, "the guarded pod running on node B, its budget observed with 0 disruptions allowed", func() (bool, string) {
		p = w.podOn("default", "app="+guarded, nodeB)
		b, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, guarded, metav1.GetOptions{})
		if err != nil || p == nil {
			return false, fmt.Sprintf("pod running %v, budget %v", p != nil, err)
		}
		return b.Status.ObservedGeneration == b.Generation && b.Status.CurrentHealthy == 1 && b.Status.DisruptionsAllowed == 0,
			fmt.Sprintf("budget status %+v", b.Status)
	})
	return p
}

// guardedHeld fails t unless the guarded pod is still the pod wl holds (never evicted: an
// eviction of it is a PDB violation), the remediator reported the
// refusal (a StalePodEvictionBlocked Event on Node B naming the pod) and `kubectl nodeaddr stale`
// lists it as blocked by its PodDisruptionBudget.
func (w *cluster) guardedHeld(t *testing.T, wl workloads) {
	t.Helper()
	name := "default/" + wl.guarded.Name
	if n := w.guardedEvictions(t); n != 0 {
		t.Errorf("the guarded pods were evicted %d times despite their PodDisruptionBudget (maxUnavailable: 0)", n)
	}
	if p := w.podOn("default", "app="+guarded, nodeB); p == nil || p.UID != wl.guarded.UID {
		t.Errorf("the guarded pod %s is gone or replaced: its PodDisruptionBudget allows no disruption", name)
	}
	harness.Eventually(t, time.Minute, 500*time.Millisecond, "a StalePodEvictionBlocked Event on Node B naming "+name, func() (bool, string) {
		evs := w.c.CP.Events(t, nodeB, vocab.ReasonStalePodEvictionBlocked)
		for _, e := range evs {
			if strings.Contains(e.Message, name) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d such Events, none naming it", len(evs))
	})
	harness.Eventually(t, time.Minute, 500*time.Millisecond, "kubectl nodeaddr stale listing "+name+" as blocked by its PodDisruptionBudget", func() (bool, string) {
		items, err := w.staleItems()
		if err != nil {
			return false, err.Error()
		}
		for _, it := range items {
			if it.Kind == "pod" && it.State == "stale" && it.Namespace+"/"+it.Name == name {
				return strings.Contains(it.Remediation, "PodDisruptionBudget default/"+guarded+" allows no disruption"), it.Remediation
			}
		}
		return false, fmt.Sprintf("not listed: %+v", items)
	})
}

// staleItem is one line of `kubectl nodeaddr stale -o json` (State "stale", or "unknown" for a
// kubelet port this machine cannot reach, which is not stale).
type staleItem struct {
	Kind, Namespace, Name, Address, State, Remediation string
}

// staleItems runs `kubectl nodeaddr stale -o json` and returns what it lists (exit 1: something
// is stale; any other failure is an error).
func (w *cluster) staleItems() ([]staleItem, error) {
	out, err := exec.Command(harness.MustBuildPlugin(w.t), "--kubeconfig", w.admin, "stale", "-o", "json").Output()
	if exit := (*exec.ExitError)(nil); err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
		if exit != nil {
			return nil, fmt.Errorf("stale: %w: %s", err, exit.Stderr)
		}
		return nil, fmt.Errorf("stale: %w", err)
	}
	var list struct{ Items []staleItem }
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("stale -o json: %w: %s", err, out)
	}
	return list.Items, nil
}

// nothingStaleBut is the "stale is empty" check with exactly the guarded pod excepted: its budget
// keeps it on node B's old address on purpose.
func (w *cluster) nothingStaleBut(wl workloads) error {
	items, err := w.staleItems()
	if err != nil {
		return err
	}
	var left []string
	for _, it := range items {
		if it.State == "stale" && (it.Kind != "pod" || it.Namespace != "default" || it.Name != wl.guarded.Name) {
			left = append(left, fmt.Sprintf("%s %s/%s (%s)", it.Kind, it.Namespace, it.Name, it.Address))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("stale: %s", strings.Join(left, "; "))
	}
	return nil
}

// removeGuarded logs the PDB violations (evictions of a guarded pod) and deletes the guarded
// Deployment, then its budget, so that the cluster is left clean (the Deployment first: no
// eviction can happen in between).
func (w *cluster) removeGuarded(t *testing.T) {
	n := w.guardedEvictions(t)
	if n != 0 {
		t.Errorf("the guarded pods were evicted %d times despite their PodDisruptionBudget", n)
	}
	ctx, cs := context.Background(), w.c.CP.Admin
	if err := cs.AppsV1().Deployments("default").Delete(ctx, guarded, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete the guarded Deployment: %v", err)
	}
	harness.Eventually(t, 2*time.Minute, 500*time.Millisecond, "the guarded pod gone", func() (bool, string) {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + guarded})
		return err == nil && len(pods.Items) == 0, fmt.Sprint(err)
	})
	if err := cs.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, guarded, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete the guarded PodDisruptionBudget: %v", err)
	}
	t.Logf("PodDisruptionBudget (maxUnavailable: 0) on a stale hostNetwork pod: %d violations (StalePodEvicted Events for a guarded pod)", n)
}

// guardedEvictions counts the evictions of guarded pods the remediator reported (the Events'
// counts: a repeated Event is one object).
func (w *cluster) guardedEvictions(t *testing.T) int {
	n := 0
	for _, e := range w.c.CP.Events(t, nodeB, vocab.ReasonStalePodEvicted) {
		if strings.Contains(e.Message, "pod default/"+guarded+"-") {
			n += max(int(e.Count), 1)
		}
	}
	return n
}
