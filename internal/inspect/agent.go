package inspect

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// agentOn picks nodeaddr's pod on node among agents: a ready one first (during a rolling update the
// old and the new pod may both exist), else the newest.
func agentOn(node string, agents []corev1.Pod) *AgentPod {
	var best *corev1.Pod
	for i := range agents {
		p := &agents[i]
		if p.Spec.NodeName != node || p.DeletionTimestamp != nil {
			continue
		}
		if best == nil || better(p, best) {
			best = p
		}
	}
	if best == nil {
		return nil
	}
	a := &AgentPod{Namespace: best.Namespace, Name: best.Name, Ready: podReady(best)}
	for _, cs := range best.Status.ContainerStatuses {
		a.Restarts += cs.RestartCount
	}
	if c := agentContainer(best); c != nil {
		a.Version = imageVersion(c.Image)
	}
	return a
}

func better(p, than *corev1.Pod) bool {
	if pr, tr := podReady(p), podReady(than); pr != tr {
		return pr
	}
	return than.CreationTimestamp.Before(&p.CreationTimestamp)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// agentContainer is the container named nodeaddr, else the first one.
func agentContainer(p *corev1.Pod) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == EventComponent {
			return &p.Spec.Containers[i]
		}
	}
	if len(p.Spec.Containers) == 0 {
		return nil
	}
	return &p.Spec.Containers[0]
}

// imageVersion is an image reference's tag ("ghcr.io/nodeaddr/nodeaddr:0.1.0@sha256:…" → "0.1.0"),
// else the first 12 hex digits of its digest, else "latest" (what the runtime pulls without a tag).
func imageVersion(image string) string {
	ref, digest, _ := strings.Cut(image, "@")
	name := ref[strings.LastIndex(ref, "/")+1:]
	if _, tag, ok := strings.Cut(name, ":"); ok {
		return tag
	}
	if _, hex, ok := strings.Cut(digest, ":"); ok {
		return "@" + hex[:min(12, len(hex))]
	}
	return "latest"
}

// lastWarning is the newest Warning Event nodeaddr emitted about node (matched by name and, when the
// Event records one, UID: a Node deleted and created again under the same name starts afresh).
func lastWarning(node *corev1.Node, events []corev1.Event) *Warning {
	var w *Warning
	for i := range events {
		e := &events[i]
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.Kind != "Node" || e.InvolvedObject.Name != node.Name ||
			(e.InvolvedObject.UID != "" && node.UID != "" && e.InvolvedObject.UID != node.UID) ||
			(e.Source.Component != EventComponent && e.ReportingController != EventComponent) {
			continue
		}
		t := eventTime(e)
		if w == nil || w.Time.Before(&t) {
			w = &Warning{Reason: e.Reason, Message: e.Message, Time: t, Count: max(e.Count, 1)}
		}
	}
	return w
}

// eventTime is when an Event last happened: its series, its lastTimestamp (the legacy recorder),
// its eventTime (events/v1), its creation.
func eventTime(e *corev1.Event) metav1.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return metav1.Time{Time: e.Series.LastObservedTime.Time}
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case !e.EventTime.IsZero():
		return metav1.Time{Time: e.EventTime.Time}
	}
	return e.CreationTimestamp
}
