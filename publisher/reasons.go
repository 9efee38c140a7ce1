package publisher

import "strings"

// The reasons of every Event nodeaddr records on a Node, the publisher's, the agent's and the
// approver's, side by side: alerts and runbooks (docs/runbooks.md) match on them, so they are
// stable CamelCase constants as in sample-controller.
const (
	// ReasonAddressesUpdated: the managed addresses were written.
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
	// ReasonExternalIPDisagreement (Warning, recorded by the agent): the STUN servers see the
	// node at different addresses, so no ExternalIP is discovered (nothing is written).
	ReasonExternalIPDisagreement = "ExternalIPDisagreement"
	// ReasonCSRApproved (recorded by the approver, internal/csrapproval): a kubelet's serving CSR
	// was approved.
	ReasonCSRApproved = "KubeletServingCSRApproved"
	// ReasonCSRPending (Warning, recorded by the approver): a kubelet-serving CSR breaks a rule and
	// is left pending; the message names the rule and the CSR.
	ReasonCSRPending = "KubeletServingCSRPending"
)

// EventMessage keeps an Event's message within the 1024 bytes the events admission policy and the
// API server allow, cut on a UTF-8 boundary.
func EventMessage(s string) string {
	const limit = 1024
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit-3], "") + "..."
}
