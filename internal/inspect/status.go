// Package inspect holds what `kubectl nodeaddr` (and `nodeaddr --check-install`) decide, as pure
// functions over API objects, table-tested without a cluster: each Node's status row, the stale rules
// and the explanation read back. The commands only read the objects and print.
package inspect

import (
	"encoding/json"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// AgentSelector selects nodeaddr's agent pods: the DaemonSet's selector in deploy/daemonset.yaml and
// the Helm chart's with its default name (a test reads the manifest, so the two cannot drift).
const AgentSelector = "app.kubernetes.io/name=nodeaddr"

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
	Writers     []Writer `json:"writers"` // the owners of status.addresses, in managedFields order
	// LastWrite is when nodeaddr's field manager last changed the Node's status (nil: never).
	LastWrite     *metav1.Time `json:"lastWrite"`
	Uninitialized bool         `json:"uninitialized"` // the cloud provider's uninitialized taint
	Agent         *AgentPod    `json:"agent"`
	LastWarning   *Warning     `json:"lastWarning"`
	// Conflict is the conflict detector's message while the Node lists another Node's address.
	Conflict  string   `json:"conflict,omitempty"`
	Attention []string `json:"attention"` // Attention* reasons
}

var nodeKind = corev1.SchemeGroupVersion.WithKind("Node")

// APIObject is the Node of the row, for -o name.
func (s NodeStatus) APIObject() (schema.GroupVersionKind, string) { return nodeKind, s.Node }

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

// Status builds the row of node from the agent pods and the Warning Events (of any Node).
func Status(node *corev1.Node, agents []corev1.Pod, events []corev1.Event) NodeStatus {
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
			s.Writers = append(s.Writers, Writer{Manager: mf.Manager, Kind: writerKind(mf.Manager)})
		}
		// nodeaddr writes nothing else through the status subresource, so its status entry's time is
		// its last address write, even after another writer took the addresses over.
		if mf.Manager == vocab.FieldManager && (owns || mf.Subresource == "status") && mf.Time != nil &&
			(s.LastWrite == nil || mf.Time.After(s.LastWrite.Time)) {
			s.LastWrite = mf.Time.DeepCopy()
		}
	}
	s.Uninitialized = slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == cloudproviderapi.TaintExternalCloudProvider
	})
	if p := AgentOn(node.Name, agents); p != nil {
		s.Agent = &AgentPod{Namespace: p.Namespace, Name: p.Name, Ready: podReady(p)}
		for _, cs := range p.Status.ContainerStatuses {
			s.Agent.Restarts += cs.RestartCount
		}
		if c := AgentContainer(p); c != nil {
			s.Agent.Version = imageVersion(c.Image)
		}
	}
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
	if s.Conflict = conflictOf(node); s.Conflict != "" {
		s.Attention = append(s.Attention, AttentionAddressConflict)
	}
	return s
}

// ownsAddresses says whether a managedFields entry owns status.addresses (as a whole or any entry).
func ownsAddresses(mf metav1.ManagedFieldsEntry) bool {
	if mf.FieldsV1 == nil {
		return false
	}
	var root, status map[string]json.RawMessage
	if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &root) != nil ||
		json.Unmarshal(root["f:status"], &status) != nil {
		return false
	}
	_, ok := status["f:addresses"]
	return ok
}

// writerKind classifies a field manager. The kubelet writes as "kubelet"; the cloud-provider node
// controller runs in a cloud-controller-manager, whose manager name is its binary's
// ("cloud-controller-manager", "aws-cloud-controller-manager", …).
func writerKind(manager string) string {
	switch {
	case manager == vocab.FieldManager:
		return WriterNodeaddr
	case manager == "kubelet":
		return WriterKubelet
	case strings.Contains(manager, "cloud-controller-manager"), strings.HasSuffix(manager, "-ccm"), manager == "ccm":
		return WriterCCM
	}
	return WriterOther
}

// AgentOn picks nodeaddr's pod on node among agents: a ready one first (during a rolling update the
// old and the new pod may both exist), else the newest; nil if there is none.
func AgentOn(node string, agents []corev1.Pod) *corev1.Pod {
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
	return best
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

// AgentContainer is the container of an agent pod named nodeaddr, else the first one.
func AgentContainer(p *corev1.Pod) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == "nodeaddr" {
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

// lastWarning is the newest Warning Event nodeaddr emitted about node. Matching on the source
// component rather than on a list of reasons keeps Warnings added later visible.
func lastWarning(node *corev1.Node, events []corev1.Event) *Warning {
	var w *Warning
	for i := range events {
		e := &events[i]
		if e.Type != corev1.EventTypeWarning || !about(e, node) ||
			(e.Source.Component != vocab.EventComponent && e.ReportingController != vocab.EventComponent) {
			continue
		}
		if t := eventTime(e); w == nil || w.Time.Before(&t) {
			w = &Warning{Reason: e.Reason, Message: e.Message, Time: t, Count: max(e.Count, 1)}
		}
	}
	return w
}

// about says whether e is about node, matched by name and, when the Event records one, UID: a Node
// deleted and created again under the same name starts afresh.
func about(e *corev1.Event, node *corev1.Node) bool {
	o := e.InvolvedObject
	return o.Kind == "Node" && o.Name == node.Name && (o.UID == "" || node.UID == "" || o.UID == node.UID)
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
