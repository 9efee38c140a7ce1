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

// explain names what it could not find: the agent pod on the Node, or an explanation in its log
// (the fake clientset's log is "fake logs"); the Node must exist. Parsing a real log is
// internal/inspect's TestLastExplanation.
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
		{"no explanation logged", fake.NewClientset(node, agent), "no explanation in the log of kube-system/nodeaddr-x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := explanation(context.Background(), tc.cs, "", "app.kubernetes.io/name=nodeaddr", "node-a")
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
