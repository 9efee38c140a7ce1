package publisher

// The reasons of every Event nodeaddr records on its Node, the publisher's and the agent's, side
// by side: alerts and runbooks (docs/runbooks.md) match on them, so they are stable CamelCase
// constants as in sample-controller.
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
)
