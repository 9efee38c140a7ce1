package agentcmd

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeLister is installLister over a fake clientset (which applies label selectors as the API
// server does).
type fakeLister struct{ cs *fake.Clientset }

func (f fakeLister) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	return f.cs.CoreV1().Nodes().List(ctx, opts)
}

func (f fakeLister) ListPods(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.PodList, error) {
	return f.cs.CoreV1().Pods(ns).List(ctx, opts)
}

func checkNode(name string, labels map[string]string, internalIP string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if internalIP != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: internalIP}}
	}
	return n
}

func checkPod(ns, name, node string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/name": "nodeaddr"}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
}

var linux = map[string]string{"kubernetes.io/os": "linux"}

// --check-install passes when every selected Node has a ready agent and an InternalIP (Nodes the
// node selector leaves out, and agents of other namespaces, do not count); it keeps looking until
// --timeout and then prints what is missing, one line per Node.
func TestCheckInstall(t *testing.T) {
	opts := checkOptions{enabled: true, namespace: "kube-system", agentSelector: "app.kubernetes.io/name=nodeaddr", nodeSelector: "kubernetes.io/os=linux"}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		wantErr string
		want    string
	}{
		{"installed", []runtime.Object{checkNode("a", linux, "10.0.0.1"), checkNode("win", map[string]string{"kubernetes.io/os": "windows"}, ""),
			checkPod("kube-system", "nodeaddr-a", "a", true)}, "",
			"a: ok: agent kube-system/nodeaddr-a ready, InternalIP 10.0.0.1\nnodeaddr install check passed: 1 Node(s)\n"},
		{"agent not ready, agent of another namespace", []runtime.Object{checkNode("a", linux, "10.0.0.1"), checkNode("b", linux, ""),
			checkPod("kube-system", "nodeaddr-a", "a", false), checkPod("other", "nodeaddr-b", "b", true)},
			"install check failed after 50ms: 2 of 2 line(s) not ok",
			"a: FAIL: agent kube-system/nodeaddr-a not ready (kubectl -n kube-system logs nodeaddr-a; its /readyz says why)\n" +
				"b: FAIL: no agent pod on it (is the DaemonSet's node selector or affinity narrower than the check's?); no InternalIP (kubectl -n default get events --field-selector involvedObject.name=b)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := checkInstall(t.Context(), fakeLister{fake.NewClientset(tc.objects...)}, opts, 50*time.Millisecond, 10*time.Millisecond, &out)
			if (err == nil) != (tc.wantErr == "") || err != nil && err.Error() != tc.wantErr {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
			if out.String() != tc.want {
				t.Errorf("printed\n%s\nwant\n%s", out.String(), tc.want)
			}
		})
	}
}

// An install that becomes ready while the check waits passes; a refused list fails with the
// API server's error once --timeout ends.
func TestCheckInstallWaitsAndReportsErrors(t *testing.T) {
	opts := checkOptions{namespace: "kube-system", agentSelector: "app.kubernetes.io/name=nodeaddr"}
	cs := fake.NewClientset(checkNode("a", nil, "10.0.0.1"), checkPod("kube-system", "nodeaddr-a", "a", false))
	lists := 0
	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lists++; lists == 3 {
			p := checkPod("kube-system", "nodeaddr-a", "a", true)
			return true, &corev1.PodList{Items: []corev1.Pod{*p}}, nil
		}
		return false, nil, nil
	})
	var out bytes.Buffer
	if err := checkInstall(t.Context(), fakeLister{cs}, opts, 10*time.Second, time.Millisecond, &out); err != nil || lists != 3 {
		t.Errorf("err = %v after %d lists, want success at the third:\n%s", err, lists, out.String())
	}

	cs = fake.NewClientset()
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New(`nodes is forbidden: User "system:serviceaccount:kube-system:x" cannot list resource "nodes"`)
	})
	err := checkInstall(t.Context(), fakeLister{cs}, opts, 20*time.Millisecond, time.Millisecond, &out)
	if err == nil || !strings.Contains(err.Error(), "list nodes") || !strings.Contains(err.Error(), "cannot list resource") {
		t.Errorf("err = %v, want the list's refusal", err)
	}
}

// --check-install needs no Node name and refuses a selector the API server would refuse.
func TestCheckInstallFlags(t *testing.T) {
	o, err := parse([]string{"--check-install"}, env("POD_NAMESPACE", "nodeaddr-system"))
	if err != nil || !o.check.enabled || o.check.namespace != "nodeaddr-system" || o.check.nodeSelector != "kubernetes.io/os=linux" {
		t.Fatalf("parse --check-install = %+v, %v", o, err)
	}
	if _, err := parse([]string{"--check-install", "--check-node-selector=a b"}, env()); err == nil || !strings.Contains(err.Error(), "--check-node-selector") {
		t.Errorf("bad selector: %v, want a usage error naming the flag", err)
	}
}
