package leader

import (
	"fmt"
	"net/http"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/internal/kube"
)

// Clients are what every leader-elected controller talks to besides the groups of its own work:
// the core group, its leader Lease's group and its Event sink, over one scheme and one HTTP client
// (no clientset: see csrapproval.API). Each controller's API embeds them.
type Clients struct {
	// Core is the core/v1 group's client.
	Core rest.Interface
	// HTTP is the client every group client shares; a controller's own groups use it too.
	HTTP *http.Client

	scheme       *runtime.Scheme
	coord        rest.Interface
	events       *kube.Client
	fieldManager string
}

// NewClients builds them on cfg over hc (nil: one of its own). scheme must hold core/v1's Event and
// coordination/v1's Lease; fieldManager names the controller in its Lease's managedFields.
func NewClients(cfg *rest.Config, hc *http.Client, scheme *runtime.Scheme, fieldManager string) (*Clients, error) {
	var err error
	if hc == nil {
		if hc, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
	}
	c := &Clients{HTTP: hc, scheme: scheme, fieldManager: fieldManager}
	if c.Core, err = kube.NewGroupClient(cfg, scheme, hc, corev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.coord, err = kube.NewGroupClient(cfg, scheme, hc, coordinationv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.events, err = kube.NewClientForConfigAndClient(cfg, scheme, hc); err != nil {
		return nil, err
	}
	return c, nil
}

// Scheme is the scheme of the controller's objects, for its event recorder.
func (c *Clients) Scheme() *runtime.Scheme { return c.scheme }

// EventSink is where the controller's event recorder writes.
func (c *Clients) EventSink() kube.EventSink { return c.events.EventSink() }

// Lease is the client of the leader Lease namespace/name, writing as the controller's field manager.
func (c *Clients) Lease(namespace, name string) LeaseClient {
	return NewLeaseClient(c.coord, namespace, name, c.fieldManager)
}
