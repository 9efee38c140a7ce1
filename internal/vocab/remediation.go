package vocab

// The remediator's names (`nodeaddr remediator`, internal/remediation): it evicts the hostNetwork
// pods that a renumbering left on their Node's old address.
const (
	// RemediatorFieldManager names the remediator's writes (its Lease).
	RemediatorFieldManager = "nodeaddr-remediator"
	// RemediatorEventComponent is the source component of the remediator's Events.
	RemediatorEventComponent = "nodeaddr-remediator"
	// RemediationAnnotation on a pod (put it on the pod template) set to RemediationDisabled keeps
	// the remediator from evicting that pod; the pod is reported, not evicted.
	RemediationAnnotation = "nodeaddr.io/remediation"
	// RemediationDisabled is the value of RemediationAnnotation that opts a pod out.
	RemediationDisabled = "disabled"
)

// The remediator's Event reasons, on the Node of the pod (deploy/components/pod-remediation's
// policy lists them).
const (
	// ReasonStalePodEvicted: a hostNetwork pod on an old address was evicted, so that its
	// controller creates it again with the Node's current address.
	ReasonStalePodEvicted = "StalePodEvicted"
	// ReasonStalePodNotEvicted (Warning): a stale hostNetwork pod the remediator will not evict (a
	// static pod, no controller, opted out); the message says why and what to do.
	ReasonStalePodNotEvicted = "StalePodNotEvicted"
	// ReasonStalePodEvictionBlocked (Warning): the eviction was refused (a PodDisruptionBudget,
	// 429) and is retried with backoff, never forced.
	ReasonStalePodEvictionBlocked = "StalePodEvictionBlocked"
)
