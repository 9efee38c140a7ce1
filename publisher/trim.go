package publisher

import corev1 "k8s.io/api/core/v1"

// trimNode drops from n, in place, what the publisher never reads (status.images, managedFields'
// field sets); writes are patches of single fields, so nothing trimmed is ever written back.
func trimNode(n *corev1.Node) {
	n.Status.Images = nil
	for i := range n.ManagedFields {
		n.ManagedFields[i].FieldsV1 = nil
	}
}

// trimTransform is the informer's TransformFunc: its objects are not shared yet, so trimming is safe.
func trimTransform(o any) (any, error) {
	if n, ok := o.(*corev1.Node); ok {
		trimNode(n)
	}
	return o, nil
}
