package publisher

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/resolver/explanation"
)

// The reasons of every Event nodeaddr records, stable CamelCase constants: alerts and runbooks
// (docs/runbooks.md) match on them.
const (
	// ReasonAddressesUpdated: the managed addresses were written (addressesUpdatedMessage).
	ReasonAddressesUpdated = explanation.EventReason
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
	// ReasonCSRApproved (recorded by internal/csrapproval): a kubelet's serving CSR was approved.
	ReasonCSRApproved = "KubeletServingCSRApproved"
	// ReasonCSRPending (Warning, by the approver): a kubelet-serving CSR breaks a rule.
	ReasonCSRPending = "KubeletServingCSRPending"
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

// addressesUpdatedMessage is the message of the AddressesUpdated Event: the change from old to now,
// then why, in the form resolver/explanation.Parse reads, bounded to EventMessageLimit.
func addressesUpdatedMessage(old, now []corev1.NodeAddress, why []resolver.Explained) string {
	return explanation.Format(fmt.Sprintf("Addresses changed from %v to %v", old, now), why, EventMessageLimit)
}

// CorrelatorOptions keep a folded Event's message as it is: client-go's "(combined from similar
// events): " prefix would take a message of EventMessageLimit past what the admission policy allows.
func CorrelatorOptions() record.CorrelatorOptions {
	return record.CorrelatorOptions{MessageFunc: func(e *corev1.Event) string { return e.Message }}
}
