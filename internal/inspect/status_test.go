package inspect

import (
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

var t0 = time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { t := metav1.NewTime(t0.Add(d)); return &t }

// fields is a managedFields entry owning the given status fields.
func fields(manager, subresource string, when *metav1.Time, statusFields ...string) metav1.ManagedFieldsEntry {
	raw := `{"f:status":{`
	for i, f := range statusFields {
		if i > 0 {
			raw += ","
		}
		raw += `"f:` + f + `":{}`
	}
	raw += `}}`
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource,
		Time: when, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(raw)}
}

func node(name string, addrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name)}}
	for i := 0; i+1 < len(addrs); i += 2 {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(addrs[i]), Address: addrs[i+1]})
	}
	return n
}

func agentPod(name, node string, ready bool, restarts int32, image string, created time.Duration) corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, CreationTimestamp: *at(created)},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "nodeaddr", Image: image}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "nodeaddr", RestartCount: restarts}}},
	}
}

func warning(node, uid, component, reason string, last time.Duration) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: node + "." + reason},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node, UID: k8stypes.UID(uid)},
		Type:           corev1.EventTypeWarning, Reason: reason, Message: reason + " message",
		Source: corev1.EventSource{Component: component}, LastTimestamp: *at(last), Count: 2,
	}
}

func TestStatusWriters(t *testing.T) {
	tests := []struct {
		name      string
		entries   []metav1.ManagedFieldsEntry
		writers   []Writer
		lastWrite *metav1.Time
	}{
		{"nodeaddr owns the addresses", []metav1.ManagedFieldsEntry{
			fields("kubelet", "status", at(-time.Hour), "conditions", "nodeInfo"),
			fields("nodeaddr", "status", at(-5*time.Minute), "addresses"),
		}, []Writer{{"nodeaddr", WriterNodeaddr}}, at(-5 * time.Minute)},
		{"the kubelet took them over: nodeaddr's status write still dates its last address write", []metav1.ManagedFieldsEntry{
			fields("nodeaddr", "status", at(-10*time.Minute)),
			fields("kubelet", "status", at(-time.Minute), "addresses", "conditions"),
		}, []Writer{{"kubelet", WriterKubelet}}, at(-10 * time.Minute)},
		{"a cloud-controller-manager and someone else", []metav1.ManagedFieldsEntry{
			fields("aws-cloud-controller-manager", "status", at(0), "addresses"),
			fields("kubectl-edit", "status", at(0), "addresses"),
		}, []Writer{{"aws-cloud-controller-manager", WriterCCM}, {"kubectl-edit", WriterOther}}, nil},
		{"nodeaddr's annotation write on the main resource is no address write", []metav1.ManagedFieldsEntry{
			{Manager: "nodeaddr", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(0), FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{}}}`)},
		}, []Writer{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := node("a", "InternalIP", "10.0.0.1")
			n.ManagedFields = tt.entries
			s := Status(n, nil, nil)
			if !equalWriters(s.Writers, tt.writers) {
				t.Errorf("writers = %v, want %v", s.Writers, tt.writers)
			}
			if (s.LastWrite == nil) != (tt.lastWrite == nil) || (s.LastWrite != nil && !s.LastWrite.Equal(tt.lastWrite)) {
				t.Errorf("last write = %v, want %v", s.LastWrite, tt.lastWrite)
			}
		})
	}
}

func equalWriters(a, b []Writer) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStatusAgentWarningAttention(t *testing.T) {
	tainted := node("b")
	tainted.Spec.Taints = []corev1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	pods := []corev1.Pod{
		agentPod("nodeaddr-old", "a", false, 7, "ghcr.io/nodeaddr/nodeaddr:0.1.0", -time.Hour),
		agentPod("nodeaddr-new", "a", true, 1, "ghcr.io/nodeaddr/nodeaddr:0.2.0@sha256:0123456789abcdef0123", -time.Minute),
		agentPod("nodeaddr-c", "c", false, 3, "registry:5000/nodeaddr@sha256:abcdef0123456789abcd", -time.Minute),
	}
	events := []corev1.Event{
		warning("a", "uid-a", "nodeaddr", "AddressesOverwritten", -3*time.Minute),
		warning("a", "uid-a", "nodeaddr", "ExternalIPDisagreement", -2*time.Minute),
		warning("a", "uid-a", "kubelet", "Rebooted", -time.Minute),          // not nodeaddr's
		warning("a", "uid-old", "nodeaddr", "WriteFailed", -30*time.Second), // an earlier Node of that name
		warning("b", "uid-b", "nodeaddr", "ProvidedNodeIPNotFound", -time.Hour),
	}
	tests := []struct {
		node      *corev1.Node
		agent     *AgentPod
		warning   string
		attention []string
	}{
		{node("a", "InternalIP", "10.0.0.1"), &AgentPod{"kube-system", "nodeaddr-new", true, 1, "0.2.0"}, "ExternalIPDisagreement", []string{}},
		{tainted, nil, "ProvidedNodeIPNotFound", []string{AttentionNoAgent, AttentionTaintedWithoutAddresss}},
		{node("c", "ExternalIP", "203.0.113.1"), &AgentPod{"kube-system", "nodeaddr-c", false, 3, "@abcdef012345"}, "", []string{AttentionAgentNotReady}},
	}
	for _, tt := range tests {
		t.Run(tt.node.Name, func(t *testing.T) {
			s := Status(tt.node, pods, events)
			if (s.Agent == nil) != (tt.agent == nil) || (s.Agent != nil && *s.Agent != *tt.agent) {
				t.Errorf("agent = %+v, want %+v", s.Agent, tt.agent)
			}
			got := ""
			if s.LastWarning != nil {
				got = s.LastWarning.Reason
			}
			if got != tt.warning {
				t.Errorf("last warning = %q, want %q", got, tt.warning)
			}
			if strings.Join(s.Attention, ",") != strings.Join(tt.attention, ",") {
				t.Errorf("attention = %v, want %v", s.Attention, tt.attention)
			}
		})
	}
}

func TestImageVersion(t *testing.T) {
	for image, want := range map[string]string{
		"ghcr.io/nodeaddr/nodeaddr:0.1.0":                 "0.1.0",
		"ghcr.io/nodeaddr/nodeaddr:0.1.0@sha256:abc":      "0.1.0",
		"localhost:5000/nodeaddr":                         "latest",
		"localhost:5000/nodeaddr@sha256:0123456789abcdef": "@0123456789ab",
		"nodeaddr:v0.1.0":                                 "v0.1.0",
	} {
		if got := imageVersion(image); got != want {
			t.Errorf("imageVersion(%q) = %q, want %q", image, got, want)
		}
	}
}

// TestAgentSelectorMatchesDaemonSet: the plugin finds the agents by the DaemonSet's own selector.
func TestAgentSelectorMatchesDaemonSet(t *testing.T) {
	data, err := os.ReadFile("../../deploy/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(data, &ds); err != nil {
		t.Fatal(err)
	}
	want := labels.SelectorFromSet(ds.Spec.Selector.MatchLabels).String()
	if AgentSelector != want {
		t.Errorf("AgentSelector = %q, the DaemonSet selects %q", AgentSelector, want)
	}
}
