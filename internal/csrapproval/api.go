package csrapproval

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	certv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/kube"
)

// API is the approver's REST clients, one per API group it reads, over Scheme: the generated typed
// clients would link every group's types into the binary the agents run too.
type API struct {
	scheme                             *runtime.Scheme
	core, certs, discovery, net, coord rest.Interface
	events                             *kube.Client
}

// Scheme is the scheme of the approver's objects, for its event recorder.
func (a *API) Scheme() *runtime.Scheme { return a.scheme }

// EventSink is where the approver's event recorder writes.
func (a *API) EventSink() kube.EventSink { return a.events.EventSink() }

// NewAPI builds the clients on cfg over hc (nil: one of its own).
func NewAPI(cfg *rest.Config, hc *http.Client) (*API, error) {
	a := &API{scheme: Scheme()}
	if hc == nil {
		var err error
		if hc, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
	}
	var err error
	if a.core, err = kube.NewGroupClient(cfg, a.scheme, hc, corev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if a.certs, err = kube.NewGroupClient(cfg, a.scheme, hc, certv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if a.discovery, err = kube.NewGroupClient(cfg, a.scheme, hc, discoveryv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if a.net, err = kube.NewGroupClient(cfg, a.scheme, hc, networkingv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if a.coord, err = kube.NewGroupClient(cfg, a.scheme, hc, coordinationv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if a.events, err = kube.NewClientForConfigAndClient(cfg, a.scheme, hc); err != nil {
		return nil, err
	}
	return a, nil
}

// Source is what the controller reads and writes; ServiceCIDRs only where the API server serves them.
func (a *API) Source(ctx context.Context) (Source, error) {
	lw := func(c rest.Interface, resource, ns string, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
		return cache.NewFilteredListWatchFromClient(c, resource, ns, tweak)
	}
	src := Source{
		CSRs:  lw(a.certs, "certificatesigningrequests", "", func(o *metav1.ListOptions) { o.FieldSelector = SignerFieldSelector }),
		Nodes: lw(a.core, "nodes", "", func(*metav1.ListOptions) {}),
		Services: lw(a.core, "services", rules.APIServerNamespace, func(o *metav1.ListOptions) {
			o.FieldSelector = rules.APIServerServiceSelector
		}),
		EndpointSlices: lw(a.discovery, "endpointslices", rules.APIServerNamespace, func(o *metav1.ListOptions) {
			o.LabelSelector = rules.APIServerSliceSelector
		}),
		Approve: func(ctx context.Context, csr *certv1.CertificateSigningRequest) error {
			return a.certs.Put().Resource("certificatesigningrequests").Name(csr.Name).SubResource("approval").
				VersionedParams(&metav1.UpdateOptions{FieldManager: FieldManager}, metav1.ParameterCodec).
				Body(csr).Do(ctx).Error()
		},
	}
	served, err := a.servesServiceCIDRs(ctx)
	if err != nil {
		return src, err
	}
	if served {
		src.ServiceCIDRs = lw(a.net, "servicecidrs", "", func(*metav1.ListOptions) {})
	}
	return src, nil
}

// servesServiceCIDRs reports whether the API server serves networking.k8s.io/v1 ServiceCIDRs (1.33+).
func (a *API) servesServiceCIDRs(ctx context.Context) (bool, error) {
	raw, err := a.net.Get().AbsPath("/apis", networkingv1.SchemeGroupVersion.String()).Do(ctx).Raw()
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", networkingv1.SchemeGroupVersion, err)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		return false, fmt.Errorf("discover %s: %w", networkingv1.SchemeGroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "servicecidrs" {
			return true, nil
		}
	}
	return false, nil
}

// Lease is the leader Lease's client.
func (a *API) Lease(namespace, name string) LeaseClient {
	return leaseClient{c: a.coord, ns: namespace, name: name}
}

type leaseClient struct {
	c        rest.Interface
	ns, name string
}

func (l leaseClient) Get(ctx context.Context) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, l.c.Get().Namespace(l.ns).Resource("leases").Name(l.name).Do(ctx).Into(out)
}

func (l leaseClient) Create(ctx context.Context, in *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	in = in.DeepCopy()
	in.Name, in.Namespace = l.name, l.ns
	out := &coordinationv1.Lease{}
	return out, l.c.Post().Namespace(l.ns).Resource("leases").
		VersionedParams(&metav1.CreateOptions{FieldManager: FieldManager}, metav1.ParameterCodec).Body(in).Do(ctx).Into(out)
}

func (l leaseClient) Update(ctx context.Context, in *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, l.c.Put().Namespace(l.ns).Resource("leases").Name(l.name).
		VersionedParams(&metav1.UpdateOptions{FieldManager: FieldManager}, metav1.ParameterCodec).Body(in).Do(ctx).Into(out)
}
