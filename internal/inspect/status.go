package inspect

import (
	"encoding/json"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nodeaddr/nodeaddr/publisher/identity"
)

// AgentSelector selects nodeaddr's agent pods: the DaemonSet's selector in deploy/daemonset.yaml and
// the Helm chart's with its default name (a test reads the manifest, so the two cannot drift).
const AgentSelector = "app.kubernetes.io/name=nodeaddr"

// EventComponent is the source component of the Events nodeaddr emits. Matching on it rather than
// on a list of reasons keeps Warnings added later visible.
const EventComponent = identity.EventComponent

// Writer kinds: who owns status.addresses in managedFields.
const (
	WriterNodeaddr = "nodeaddr"
	WriterKubelet  = "kubelet"
	WriterCCM      = "ccm"
	WriterOther    = "other"
)

// Attention reasons: why a row stands out.
const (
	AttentionNoAgent                = "no-agent"
	AttentionAgentNotReady          = "agent-not-ready"
	AttentionTaintedWithoutAddresss = "tainted-without-addresses"
)

// NodeStatus is one Node's line of `kubectl nodeaddr status`; its JSON form is the stable structure
// of -o json and -o yaml.
type NodeStatus struct {
	Node        string   `json:"node"`
	InternalIPs []string `json:"internalIPs"`
	ExternalIPs []string `json:"externalIPs"`
	// Writers are the field managers that own status.addresses, in managedFields order.
	Writers []Writer `json:"writers"`
	// LastWrite is when nodeaddr's field manager last changed the Node's status (nil: never).
	LastWrite *metav1.Time `json:"lastWrite"`
	// Uninitialized says whether node.cloudprovider.kubernetes.io/uninitialized is still there.
	Uninitialized bool      `json:"uninitialized"`
	Agent         *AgentPod `json:"agent"`
	LastWarning   *Warning  `json:"lastWarning"`
	// Attention lists why the row stands out (no agent, agent not ready, tainted without addresses).
	Attention []string `json:"attention"`
}

// Writer is a field manager owning status.addresses.
type Writer struct {
	Manager string `json:"manager"`
	Kind    string `json:"kind"`
}

// AgentPod is nodeaddr's pod on a Node.
type AgentPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Ready     bool   `json:"ready"`
	Restarts  int32  `json:"restarts"`
	Version   string `json:"version"`
}

// Warning is the last Warning Event nodeaddr emitted about a Node.
type Warning struct {
	Reason  string      `json:"reason"`
	Message string      `json:"message"`
	Time    metav1.Time `json:"time"`
	Count   int32       `json:"count"`
}

// Status builds the row of node from the agent pods and the Warning Events that may concern it (any
// node's: Status picks those about node). fieldManager is nodeaddr's field manager name.
func Status(node *corev1.Node, agents []corev1.Pod, events []corev1.Event, fieldManager string) NodeStatus {
	s := NodeStatus{Node: node.Name, InternalIPs: []string{}, ExternalIPs: []string{}, Writers: []Writer{}, Attention: []string{}}
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP:
			s.InternalIPs = append(s.InternalIPs, a.Address)
		case corev1.NodeExternalIP:
			s.ExternalIPs = append(s.ExternalIPs, a.Address)
		}
	}
	for _, mf := range node.ManagedFields {
		owns := ownsAddresses(mf)
		if owns {
			s.Writers = append(s.Writers, Writer{Manager: mf.Manager, Kind: writerKind(mf.Manager, fieldManager)})
		}
		// nodeaddr writes nothing else through the status subresource, so its status entry's time is
		// its last address write, even after another writer took the addresses over.
		if mf.Manager == fieldManager && (owns || mf.Subresource == "status") && mf.Time != nil &&
			(s.LastWrite == nil || mf.Time.After(s.LastWrite.Time)) {
			s.LastWrite = mf.Time.DeepCopy()
		}
	}
	s.Uninitialized = slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == cloudproviderapi.TaintExternalCloudProvider
	})
	s.Agent = agentOn(node.Name, agents)
	s.LastWarning = lastWarning(node, events)
	switch {
	case s.Agent == nil:
		s.Attention = append(s.Attention, AttentionNoAgent)
	case !s.Agent.Ready:
		s.Attention = append(s.Attention, AttentionAgentNotReady)
	}
	if s.Uninitialized && len(s.InternalIPs)+len(s.ExternalIPs) == 0 {
		s.Attention = append(s.Attention, AttentionTaintedWithoutAddresss)
	}
	return s
}

// ownsAddresses says whether a managedFields entry owns status.addresses (as a whole or any entry).
func ownsAddresses(mf metav1.ManagedFieldsEntry) bool {
	if mf.FieldsV1 == nil {
		return false
	}
	var root map[string]json.RawMessage
	if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &root) != nil {
		return false
	}
	var status map[string]json.RawMessage
	if json.Unmarshal(root["f:status"], &status) != nil {
		return false
	}
	_, ok := status["f:addresses"]
	return ok
}

// writerKind classifies a field manager. The kubelet writes as "kubelet"; the cloud-provider node
// controller runs in a cloud-controller-manager, whose manager name is its binary's
// ("cloud-controller-manager", "aws-cloud-controller-manager", …).
func writerKind(manager, fieldManager string) string {
	switch {
	case manager == fieldManager:
		return WriterNodeaddr
	case manager == "kubelet":
		return WriterKubelet
	case strings.Contains(manager, "cloud-controller-manager"), strings.HasSuffix(manager, "-ccm"), manager == "ccm":
		return WriterCCM
	}
	return WriterOther
}
