package vocab

import "strings"

// Who wrote: the field managers in managedFields and the source components of Events.
const (
	// FieldManager names the agent's writes to its Node.
	FieldManager = "nodeaddr"
	// EventComponent is the source component of the agent's Events.
	EventComponent = "nodeaddr"
	// ApproverFieldManager names the approver's writes (a CSR's Approved condition).
	ApproverFieldManager = "nodeaddr-approver"
	// ApproverEventComponent is the source component of the approver's Events.
	ApproverEventComponent = "nodeaddr-approver"
	// ApprovalReason is the reason of the Approved condition the approver adds to a CSR.
	ApprovalReason = "NodeaddrApproved"
	// ConflictsFieldManager names the conflict detector's writes (its Node condition, its Lease).
	ConflictsFieldManager = "nodeaddr-conflicts"
	// ConflictsEventComponent is the source component of the conflict detector's Events.
	ConflictsEventComponent = "nodeaddr-conflicts"
)

// The conflict detector's Node condition (`nodeaddr conflicts`, internal/conflicts): the only
// condition it writes, and the only change of a Node its admission policy lets it make
// (deploy/components/address-conflicts/policy.yaml names the same strings).
const (
	// ConditionAddressConflict is True while another Node lists one of this Node's addresses.
	ConditionAddressConflict = "NodeAddressConflict"
	// ConflictReasonAnotherNode: an address is also listed by another Node (a Ready one, or one
	// without a Ready condition), or this Node is NotReady and a Ready Node lists its address.
	ConflictReasonAnotherNode = "AddressListedByAnotherNode"
	// ConflictReasonNotReadyNode: every other Node that lists one of this Node's addresses is
	// NotReady (a stale Node: its agent gone, e.g. a DHCP lease handed to a new node).
	ConflictReasonNotReadyNode = "AddressListedByNotReadyNode"
	// ConflictReasonNone: the condition is False; no other Node lists an address of this Node.
	ConflictReasonNone = "NoAddressConflict"
)

// The reasons of every Event nodeaddr records, stable CamelCase constants: alerts and runbooks
// (docs/runbooks.md) match on them.
const (
	// ReasonAddressesUpdated: the managed addresses were written; the message is an explanation
	// (resolver/explanation), which kubectl nodeaddr explain reads back.
	ReasonAddressesUpdated = "AddressesUpdated"
	// ReasonTaintRemoved: the uninitialized taint was removed.
	ReasonTaintRemoved = "TaintRemoved"
	// ReasonAnnotationsUpdated: the configured address annotations were written.
	ReasonAnnotationsUpdated = "AnnotationsUpdated"
	// ReasonAddressesOverwritten (Warning): another writer replaced the addresses nodeaddr wrote.
	ReasonAddressesOverwritten = "AddressesOverwritten"
	// ReasonWriteFailed (Warning): writes keep failing.
	ReasonWriteFailed = "AddressesWriteFailed"
	// ReasonProvidedNodeIPNotFound (Warning): the kubelet's provided-node-ip is not on the host.
	ReasonProvidedNodeIPNotFound = "ProvidedNodeIPNotFound"
	// ReasonProvidedNodeIPInvalid (Warning): the annotation cannot be parsed and is ignored.
	ReasonProvidedNodeIPInvalid = "ProvidedNodeIPInvalid"
	// ReasonDuplicateAddress (Warning, by the agent): duplicate address detection failed.
	ReasonDuplicateAddress = "DuplicateAddress"
	// ReasonExternalIPDisagreement (Warning, by the agent): the STUN servers disagree.
	ReasonExternalIPDisagreement = "ExternalIPDisagreement"
	// ReasonCSRApproved (by the approver): a kubelet's serving CSR was approved.
	ReasonCSRApproved = "KubeletServingCSRApproved"
	// ReasonCSRPending (Warning, by the approver): a kubelet-serving CSR breaks a rule.
	ReasonCSRPending = "KubeletServingCSRPending"
	// ReasonAddressConflict (Warning, by the conflict detector): another Node lists an address of
	// this Node; the message names it.
	ReasonAddressConflict = "NodeAddressConflict"
	// ReasonAddressConflictResolved (by the conflict detector): no other Node lists its addresses.
	ReasonAddressConflictResolved = "NodeAddressConflictResolved"
)

// EventMessageLimit is the longest Event message nodeaddr writes (deploy/admission-policy.yaml).
const EventMessageLimit = 1024

// EventMessage keeps an Event's message within EventMessageLimit, cut on a UTF-8 boundary.
func EventMessage(s string) string {
	if len(s) <= EventMessageLimit {
		return s
	}
	return strings.ToValidUTF8(s[:EventMessageLimit-3], "") + "..."
}

// ExplainMessage is the message of the agent's log record that explains each change of the
// addresses it publishes; ExplainKey is its attribute holding the explanation as a JSON array.
const (
	ExplainMessage = "addresses explained"
	ExplainKey     = "explain"
)
