// Writes as the agent (or another writer) would send them, to test what RBAC and the admission
// policies let through.
package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// NodePatch is one write the agent's token attempts (or another writer's, with its own manager).
type NodePatch struct {
	Node, Subresource string
	PT                types.PatchType
	Body              string
	Manager           string // field manager; "" is nodeaddr
}

// Do sends the write with cs's identity.
func (p NodePatch) Do(ctx context.Context, cs kubernetes.Interface) error {
	var sub []string
	if p.Subresource != "" {
		sub = []string{p.Subresource}
	}
	manager := p.Manager
	if manager == "" {
		manager = "nodeaddr"
	}
	_, err := cs.CoreV1().Nodes().Patch(ctx, p.Node, p.PT, []byte(p.Body), metav1.PatchOptions{FieldManager: manager}, sub...)
	return err
}

// MergePatch is a JSON merge patch of node through subresource ("" or "status"), as nodeaddr.
func MergePatch(node, subresource, body string) NodePatch {
	return NodePatch{Node: node, Subresource: subresource, PT: types.MergePatchType, Body: body}
}

// WaitPolicyEffective retries a write the policy denies until it is denied: a new policy takes a
// moment to reach the API server's admission chain.
func WaitPolicyEffective(t *testing.T, cs kubernetes.Interface, p NodePatch) {
	t.Helper()
	// Any answer naming the policy will do here (whatever its status code): the tests check the
	// code of the denials they are about.
	PollWrite(t, cs, p, func(err error) bool { return NamesPolicy(err, PolicyName) }, "denied by policy "+PolicyName)
}

// NamesPolicy reports whether err is an answer of the named policy, whatever its status code.
func NamesPolicy(err error, policy string) bool {
	return err != nil && strings.Contains(err.Error(), fmt.Sprintf("ValidatingAdmissionPolicy '%s'", policy))
}

// PollWrite retries p until its result satisfies want, for at most 30 s.
func PollWrite(t *testing.T, cs kubernetes.Interface, p NodePatch, want func(error) bool, what string) {
	t.Helper()
	Eventually(t, 30*time.Second, 100*time.Millisecond, "write "+what, func() (bool, string) {
		err := p.Do(context.Background(), cs)
		return want(err), fmt.Sprint(err)
	})
}

// NodeEvent is an Event about node from component, as client-go's recorder writes it.
func NodeEvent(cp *ControlPlane, t *testing.T, node, component, reason string) *corev1.Event {
	t.Helper()
	n := cp.Node(t, node)
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: node + ".", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: n.UID},
		Reason:         reason, Message: "Addresses changed", Type: corev1.EventTypeNormal, Count: 1,
		Source:         corev1.EventSource{Component: component, Host: node},
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
	}
}

// CreateEvent creates ev with cs's identity.
func CreateEvent(ctx context.Context, cs kubernetes.Interface, ev *corev1.Event) error {
	_, err := cs.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

// PodToken returns a token of ServiceAccount ns/sa bound to a new Pod on node, as the kubelet would
// request it for the DaemonSet's projected volume (one hour).
func PodToken(t *testing.T, cp *ControlPlane, ns, sa, node string) string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "nodeaddr-", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa,
			Containers: []corev1.Container{{Name: "nodeaddr", Image: "nodeaddr:test"}}},
	}
	Eventually(t, 10*time.Second, 100*time.Millisecond, "create pod in "+ns, func() (bool, string) {
		created, err := cp.Admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = created
		return true, ""
	})
	exp := int64(3600)
	tr, err := cp.Admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s on %s: %v", ns, sa, node, err)
	}
	return tr.Status.Token
}

// OtherWritersWork checks that writers of Nodes other than nodeaddr are not blocked: an
// administrator cordons and uncordons node, and its kubelet writes a status condition.
func OtherWritersWork(t *testing.T, cp *ControlPlane, node, when string) {
	t.Helper()
	ctx := context.Background()
	for _, body := range []string{`{"spec":{"unschedulable":true}}`, `{"spec":{"unschedulable":null}}`} {
		p := MergePatch(node, "", body)
		p.Manager = "kubectl-cordon"
		if err := p.Do(ctx, cp.Admin); err != nil {
			t.Errorf("%s: administrator's cordon %s: %v", when, body, err)
		}
	}
	hb := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"%s","lastHeartbeatTime":"%s","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`,
		strings.ReplaceAll(when, `"`, `'`), time.Now().UTC().Format(time.RFC3339))
	p := MergePatch(node, "status", hb)
	p.Manager = "kubelet"
	if err := p.Do(ctx, cp.AsKubelet(t, node)); err != nil {
		t.Errorf("%s: kubelet status write: %v", when, err)
	}
}
