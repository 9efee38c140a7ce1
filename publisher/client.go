package publisher

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// NodeClient is the part of the Node API the publisher uses. Its methods have the signatures of
// k8s.io/client-go/kubernetes/typed/core/v1.NodeInterface, so a clientset's CoreV1().Nodes()
// satisfies it; the agent implements it on a bare REST client (cmd/nodeaddr) so that it does not
// link and register every API group the way a full clientset does.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}
