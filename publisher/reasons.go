package publisher

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/resolver/explanation"
)

// The reasons of every Event nodeaddr records on a Node, the publisher's, the agent's and the
// approver's, side by side: alerts and runbooks (docs/runbooks.md) match on them, so they are
// stable CamelCase constants as in sample-controller.
const (
	// ReasonAddressesUpdated: the managed addresses were written. The message is the change, then
	// its explanation in the text form of resolver/explanation (addressesUpdatedMessage), which
	// kubectl nodeaddr explain reads back.
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
	// ReasonDuplicateAddress (Warning, recorded by the agent, once per address per agent process):
	// an address the selection would have considered is refused because duplicate address
	// detection failed (the kernel flags it dadfailed): another host on the link holds it.
	ReasonDuplicateAddress = "DuplicateAddress"
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

// EventMessageLimit is the longest Event message nodeaddr writes, in bytes: the events admission
// policy allows 1024 characters (deploy/admission-policy.yaml, nodeaddr-events).
const EventMessageLimit = 1024

// EventMessage keeps an Event's message within EventMessageLimit, cut on a UTF-8 boundary.
func EventMessage(s string) string {
	if len(s) <= EventMessageLimit {
		return s
	}
	return strings.ToValidUTF8(s[:EventMessageLimit-3], "") + "..."
}

// addressesUpdatedMessage is the message of the AddressesUpdated Event: the change from old to now,
// then why, the explanation of the addresses written, bounded to EventMessageLimit (the chosen
// lines first, then the others as room allows). It is the contract kubectl nodeaddr explain reads
// (resolver/explanation.Parse): no other request, no log.
func addressesUpdatedMessage(old, now []corev1.NodeAddress, why []resolver.Explained) string {
	return explanation.Format(fmt.Sprintf("Addresses changed from %v to %v", old, now), resolver.Lines(why), EventMessageLimit)
}

// CorrelatorOptions are the options of the agent's Event recorder: when it folds ten or more
// similar Events (same reason, different messages, within ten minutes) into one, client-go prefixes
// the newest message with "(combined from similar events): ", which would take a message of
// EventMessageLimit past what the admission policy allows and lose the Event. The folded Event
// keeps the newest message as it is instead; its count says how many it stands for.
func CorrelatorOptions() record.CorrelatorOptions {
	return record.CorrelatorOptions{MessageFunc: func(e *corev1.Event) string { return e.Message }}
}
