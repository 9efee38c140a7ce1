package publisher

import (
	corev1 "k8s.io/api/core/v1"
)

// trimNode drops from n, in place, what the publisher never reads, so the copy it keeps (informer
// cache, last write response) is small: a kubelet reports up to 50 container images in
// status.images, and the managedFields' field sets repeat the object's structure.
//
// It must keep everything the publisher reads or builds a patch precondition from:
// status.addresses and spec.taints (the JSON patch `test` values), resourceVersion (the merge-patch
// precondition and ordering), UID, annotations (provided-node-ip), spec.podCIDR(s), and of
// managedFields the manager, subresource and time (lastStatusWriter). Writes are JSON or merge
// patches of single fields, never the whole object, so nothing trimmed here is ever written back.
func trimNode(n *corev1.Node) {
	n.Status.Images = nil
	for i := range n.ManagedFields {
		n.ManagedFields[i].FieldsV1 = nil
	}
}

// trimTransform is the informer's cache.TransformFunc: objects it gets are fresh from the decoder
// and not shared yet, so trimming in place is safe.
func trimTransform(o any) (any, error) {
	if n, ok := o.(*corev1.Node); ok {
		trimNode(n)
	}
	return o, nil
}
