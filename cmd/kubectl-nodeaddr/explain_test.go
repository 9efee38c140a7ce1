package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Without an Event, explain names what it could not find: the agent pod on the Node, or an
// explanation in its log (the fake clientset's log is "fake logs"); the Node must exist. Parsing a
// real log is internal/inspect's TestLastExplanation.
func TestExplainReportsWhatIsMissing(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	agent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "nodeaddr-x", Labels: map[string]string{"app.kubernetes.io/name": "nodeaddr"}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "nodeaddr"}}}}
	for _, tc := range []struct {
		name string
		cs   *fake.Clientset
		want string
	}{
		{"no node", fake.NewClientset(), `nodes "node-a" not found`},
		{"no agent", fake.NewClientset(node), "no nodeaddr agent pod on Node node-a"},
		{"no explanation logged", fake.NewClientset(node, agent), "no AddressesUpdated Event about Node node-a (Events expire after the API server's --event-ttl), and no explanation in the log of kube-system/nodeaddr-x"},
		{"an older agent's Event", fake.NewClientset(node, agent, explainEvent("node-a.1", "Addresses changed from [] to [{InternalIP 192.0.2.2}]", 0)),
			"no explanation in the log of kube-system/nodeaddr-x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := lastExplanation(context.Background(), tc.cs, "", "app.kubernetes.io/name=nodeaddr", "node-a")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestExplainUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"explain"}, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "explain takes one Node name") {
		t.Errorf("explain without a Node: exit %d, stderr %q", code, stderr.String())
	}
}

// explainEvent is an AddressesUpdated Event of the agent on node-a, as client-go's recorder writes
// it, last seen at second sec.
func explainEvent(name, msg string, sec int64) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "node-a", APIVersion: "v1"},
		Reason:         "AddressesUpdated", Type: corev1.EventTypeNormal, Message: msg, Count: 1,
		Source:        corev1.EventSource{Component: "nodeaddr", Host: "node-a"},
		LastTimestamp: metav1.Unix(1764921600+sec, 0)}
}

// explain reads the newest AddressesUpdated Event about the Node, and nothing else: the agent pod
// has no log to read here (none is listed; the fake clientset would serve "fake logs").
func TestExplainReadsTheEvent(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	const change = "Addresses changed from [{InternalIP 192.0.2.2}] to [{InternalIP 192.0.2.3}]"
	newest := change + "\n" +
		"+ InternalIP IPv4 192.0.2.3 (route to 192.0.2.1): chosen\n" +
		"- InternalIP IPv4 192.0.2.2 (interface eth0): rejected: deprecated\n" +
		"- InternalIP IPv6: no target of this family: not published; the Node's entry of this type and family is removed"
	older := "Addresses changed from [] to [{InternalIP 192.0.2.2}]\n+ InternalIP IPv4 192.0.2.2 (route to 192.0.2.1): chosen"
	other := explainEvent("node-b.3", older, 9)
	other.InvolvedObject.Name = "node-b"
	kubelet := explainEvent("node-a.4", older, 9)
	kubelet.Source.Component = "kubelet"
	cs := fake.NewClientset(node, explainEvent("node-a.1", older, 1), explainEvent("node-a.2", newest, 5), other, kubelet)
	e, err := lastExplanation(context.Background(), cs, "kube-system", "app.kubernetes.io/name=nodeaddr", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if e.Event != "default/node-a.2" || e.Pod != "" || e.Time != "2025-12-05T08:00:05Z" || e.Change != change || e.State != "[{InternalIP 192.0.2.3}]" {
		t.Errorf("explanation from %q (pod %q) at %s, %q, state %s", e.Event, e.Pod, e.Time, e.Change, e.State)
	}
	var got []string
	for _, l := range e.Lines {
		got = append(got, l.String())
	}
	want := []string{"InternalIP IPv4 192.0.2.3 (route to 192.0.2.1): chosen", "InternalIP IPv4 192.0.2.2 (interface eth0): rejected: deprecated",
		"InternalIP IPv6: no target of this family: not published; the Node's entry of this type and family is removed"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || !e.Lines[0].Chosen || e.Lines[1].Chosen {
		t.Errorf("lines %+v, want %q, the first chosen", e.Lines, want)
	}
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "pods" {
			t.Errorf("explain asked for %s %s: the Event is all it needs", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
