// Package kube is the agent's Kubernetes client for core/v1: Nodes, Events and (for
// --check-install) Pods, shared by cmd/nodeaddr and test/scale.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// A clientset would link and register every API group; this is the REST client the generated
// typed clients use, over a scheme that knows only what the agent sends and receives.

// Scheme holds core/v1 Node, Event and Pod (and their lists), discovery.k8s.io/v1 EndpointSlice
// (the kubernetes Service's, for the apiserver target) and the meta/v1 types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(corev1.SchemeGroupVersion,
		&corev1.Node{}, &corev1.NodeList{}, &corev1.Event{}, &corev1.EventList{}, &corev1.Pod{}, &corev1.PodList{})
	metav1.AddToGroupVersion(s, corev1.SchemeGroupVersion)
	s.AddKnownTypes(discoveryv1.SchemeGroupVersion, &discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{})
	metav1.AddToGroupVersion(s, discoveryv1.SchemeGroupVersion)
	return s
}

// Client is a REST client for core/v1, implementing the agent's NodeClient (internal/agent).
type Client struct {
	rest   rest.Interface
	slices rest.Interface // discovery.k8s.io/v1
	params runtime.ParameterCodec
}

// NewClient builds a Client from cfg over scheme (Scheme, or one that holds at least its types).
func NewClient(cfg *rest.Config, scheme *runtime.Scheme) (*Client, error) {
	c := withUserAgent(cfg)
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return NewClientForConfigAndClient(c, scheme, hc)
}

// withUserAgent is a copy of cfg with client-go's default User-Agent if it sets none.
func withUserAgent(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return c
}

// NewClientForConfigAndClient is NewClient over an HTTP client that other clients share.
func NewClientForConfigAndClient(cfg *rest.Config, scheme *runtime.Scheme, hc *http.Client) (*Client, error) {
	rc, err := NewGroupClient(cfg, scheme, hc, corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	sc, err := NewGroupClient(cfg, scheme, hc, discoveryv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &Client{rest: rc, slices: sc, params: runtime.NewParameterCodec(scheme)}, nil
}

// EndpointSlices are the EndpointSlices of one namespace, read as the generated typed client does
// (the agent's EndpointSliceClient: the kubernetes Service's, for the apiserver target).
type EndpointSlices struct {
	k         *Client
	namespace string
}

// EndpointSlices returns the EndpointSlice reader of namespace.
func (k *Client) EndpointSlices(namespace string) EndpointSlices { return EndpointSlices{k, namespace} }

func (e EndpointSlices) List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	return Do[discoveryv1.EndpointSliceList](ctx, e.k.slices.Get().UseProtobufAsDefault().Namespace(e.namespace).
		Resource("endpointslices").VersionedParams(&opts, e.k.params).Timeout(Timeout(opts)))
}

func (e EndpointSlices) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return e.k.slices.Get().UseProtobufAsDefault().Namespace(e.namespace).Resource("endpointslices").
		VersionedParams(&opts, e.k.params).Timeout(Timeout(opts)).Watch(ctx)
}

// The Node methods are those of the generated typed client, which prefers protobuf for core types.

func (k *Client) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error) {
	return Do[corev1.Node](ctx, k.rest.Get().UseProtobufAsDefault().Resource("nodes").Name(name).
		VersionedParams(&opts, k.params))
}

func (k *Client) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	return Do[corev1.NodeList](ctx, k.rest.Get().UseProtobufAsDefault().Resource("nodes").
		VersionedParams(&opts, k.params).Timeout(Timeout(opts)))
}

func (k *Client) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return k.rest.Get().UseProtobufAsDefault().Resource("nodes").VersionedParams(&opts, k.params).
		Timeout(Timeout(opts)).Watch(ctx)
}

// Patch sends one PATCH and returns its answer, including a 429 or a 5xx that carries Retry-After:
// client-go would retry those itself after exactly the seconds the server asks, so a fleet rejected
// in one second would come back in the same second. MaxRetries(0) hands them to the publisher's
// retry schedule instead (publisher/retry.go; docs/bench/outage-5000-flowschema.md).
func (k *Client) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error) {
	return Do[corev1.Node](ctx, k.rest.Patch(pt).MaxRetries(0).UseProtobufAsDefault().Resource("nodes").Name(name).
		SubResource(subresources...).VersionedParams(&opts, k.params).Body(data))
}

// ListPods lists pods in namespace ("" for every namespace), for --check-install.
func (k *Client) ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error) {
	return Do[corev1.PodList](ctx, k.rest.Get().UseProtobufAsDefault().NamespaceIfScoped(namespace, namespace != "").
		Resource("pods").VersionedParams(&opts, k.params))
}

// Do sends r and decodes its answer into a new T, as a generated typed client does.
func Do[T any, P interface {
	*T
	runtime.Object
}](ctx context.Context, r *rest.Request) (P, error) {
	out := P(new(T))
	return out, r.Do(ctx).Into(out)
}

// Timeout is a list or watch request's client-side timeout: opts.TimeoutSeconds, or none.
func Timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

// CorrelatorOptions keep a folded Event's message as it is: client-go's "(combined from similar
// events): " prefix would take a message of vocab.EventMessageLimit past what the admission policy
// allows.
func CorrelatorOptions() record.CorrelatorOptions {
	return record.CorrelatorOptions{MessageFunc: func(e *corev1.Event) string { return e.Message }}
}

// EventSink is the event broadcaster's record.EventSink on the same client.
type EventSink struct{ k *Client }

// EventSink returns the sink for record.Broadcaster.StartRecordingToSink.
func (k *Client) EventSink() EventSink { return EventSink{k} }

func (e EventSink) Create(ev *corev1.Event) (*corev1.Event, error) {
	return e.do(e.k.rest.Post(), ev, ev)
}

func (e EventSink) Update(ev *corev1.Event) (*corev1.Event, error) {
	return e.do(e.k.rest.Put().Name(ev.Name), ev, ev)
}

func (e EventSink) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	return e.do(e.k.rest.Patch(types.StrategicMergePatchType).Name(ev.Name), ev, data)
}

// do sends r for ev's Event, in ev's namespace, with body.
func (e EventSink) do(r *rest.Request, ev *corev1.Event, body any) (*corev1.Event, error) {
	return Do[corev1.Event](context.Background(),
		r.NamespaceIfScoped(ev.Namespace, ev.Namespace != "").Resource("events").Body(body))
}

// NewGroupClient is a REST client for one group version over scheme, sharing hc: what the generated
// typed clients are, without linking every group's types (a clientset took the stripped binary
// from 21.1 MB to 33.1 MB, measured on 2026-12-05).
func NewGroupClient(cfg *rest.Config, scheme *runtime.Scheme, hc *http.Client, gv schema.GroupVersion) (rest.Interface, error) {
	c := withUserAgent(cfg)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	rc, err := rest.RESTClientForConfigAndClient(c, hc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", gv, err)
	}
	return rc, nil
}

// ServiceNetwork reads the cluster's Service network, which the agent excludes: the CIDRs of its
// ServiceCIDR objects (networking.k8s.io/v1, from Kubernetes 1.33 on; a 404 is not an error) and
// the kubernetes Service's ClusterIPs (as single-address prefixes).
func (k *Client) ServiceNetwork(ctx context.Context) ([]netip.Prefix, error) {
	var out []netip.Prefix
	add := func(raw string, single bool) {
		if single {
			if ip, err := netip.ParseAddr(raw); err == nil {
				out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			}
		} else if p, err := netip.ParsePrefix(raw); err == nil {
			out = append(out, p.Masked())
		}
	}
	getJSON := func(path string, into any) error {
		body, err := k.rest.Get().AbsPath(path).SetHeader("Accept", "application/json").Do(ctx).Raw()
		if err != nil {
			return err
		}
		return json.Unmarshal(body, into)
	}
	var l networkingv1.ServiceCIDRList
	switch err := getJSON("/apis/networking.k8s.io/v1/servicecidrs", &l); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("list servicecidrs: %w", err)
	default:
		for _, sc := range l.Items {
			for _, c := range sc.Spec.CIDRs {
				add(c, false)
			}
		}
	}
	var svc corev1.Service
	if err := getJSON("/api/v1/namespaces/default/services/kubernetes", &svc); err != nil {
		return out, fmt.Errorf("get the kubernetes service: %w", err)
	}
	for _, ip := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
		add(ip, true)
	}
	return out, nil
}
