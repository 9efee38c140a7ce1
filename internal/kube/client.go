// Package kube is the agent's Kubernetes client for core/v1: Nodes, Events and (for
// --check-install) Pods. cmd/nodeaddr builds the agent's client with it, and test/scale builds every
// agent of its fleet with the same constructor, so the benchmarks measure the requests the agent
// really sends, retries included.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// The agent talks to two resources, Nodes and Events of core/v1. A clientset
// (k8s.io/client-go/kubernetes) would link every API group and register all of them in a scheme at
// start, which costs binary pages and heap for nothing; this is the same REST client the generated
// typed clients use, over a scheme that knows only what the agent sends and receives.

// Scheme holds core/v1 Node and Event (and their lists), PodList for --check-install, the
// option types the requests carry, and WatchEvent/Status. The event recorder also uses it to turn a
// Node into an object reference.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(corev1.SchemeGroupVersion,
		&corev1.Node{}, &corev1.NodeList{}, &corev1.Event{}, &corev1.EventList{}, &corev1.Pod{}, &corev1.PodList{})
	metav1.AddToGroupVersion(s, corev1.SchemeGroupVersion)
	return s
}

// Client is a REST client for the core/v1 API group, implementing publisher.NodeClient; its
// EventSink is the event recorder's record.EventSink.
type Client struct {
	rest   rest.Interface
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

// withUserAgent is a copy of cfg with client-go's default User-Agent if it sets none (the HTTP
// client's transport sends it).
func withUserAgent(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return c
}

// NewClientForConfigAndClient is NewClient over an HTTP client that other clients share (one
// connection for all of them, as client-go's NewForConfigAndClient).
func NewClientForConfigAndClient(cfg *rest.Config, scheme *runtime.Scheme, hc *http.Client) (*Client, error) {
	rc, err := NewGroupClient(cfg, scheme, hc, corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &Client{rest: rc, params: runtime.NewParameterCodec(scheme)}, nil
}

// The Node methods are those of the generated typed client (k8s.io/client-go/gentype), which
// prefers protobuf for core types.

func (k *Client) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error) {
	n := &corev1.Node{}
	err := k.rest.Get().UseProtobufAsDefault().Resource("nodes").Name(name).
		VersionedParams(&opts, k.params).Do(ctx).Into(n)
	return n, err
}

func (k *Client) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	l := &corev1.NodeList{}
	err := k.rest.Get().UseProtobufAsDefault().Resource("nodes").VersionedParams(&opts, k.params).
		Timeout(Timeout(opts)).Do(ctx).Into(l)
	return l, err
}

func (k *Client) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return k.rest.Get().UseProtobufAsDefault().Resource("nodes").VersionedParams(&opts, k.params).
		Timeout(Timeout(opts)).Watch(ctx)
}

// Patch sends one PATCH and returns its answer, including a 429 or a 5xx that carries Retry-After:
// client-go would retry those itself, up to 10 times, after exactly the seconds the server asks,
// so every agent of a fleet that the API server's priority and fairness rejected in one second
// would come back in the same second, however the agent's own retries are spread. MaxRetries(0)
// hands them to the publisher's retry schedule instead (publisher/retry.go), which keeps the
// server's Retry-After as a lower bound. docs/bench/outage-5000-flowschema.md measures both.
func (k *Client) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error) {
	n := &corev1.Node{}
	err := k.rest.Patch(pt).MaxRetries(0).UseProtobufAsDefault().Resource("nodes").Name(name).SubResource(subresources...).
		VersionedParams(&opts, k.params).Body(data).Do(ctx).Into(n)
	return n, err
}

// ListPods lists pods in namespace ("" for every namespace), for --check-install.
func (k *Client) ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error) {
	l := &corev1.PodList{}
	err := k.rest.Get().UseProtobufAsDefault().NamespaceIfScoped(namespace, namespace != "").Resource("pods").
		VersionedParams(&opts, k.params).Do(ctx).Into(l)
	return l, err
}

// Timeout is a list or watch request's client-side timeout: opts.TimeoutSeconds, or none.
func Timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

// EventSink is the event broadcaster's sink: record.EventSink on the same client, writing each
// Event to its own namespace as typedcorev1.EventSinkImpl does.
type EventSink struct{ k *Client }

// EventSink returns the sink for record.Broadcaster.StartRecordingToSink.
func (k *Client) EventSink() EventSink { return EventSink{k} }

func (e EventSink) Create(ev *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := e.k.rest.Post().NamespaceIfScoped(ev.Namespace, ev.Namespace != "").Resource("events").
		Body(ev).Do(context.Background()).Into(out)
	return out, err
}

func (e EventSink) Update(ev *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := e.k.rest.Put().NamespaceIfScoped(ev.Namespace, ev.Namespace != "").Resource("events").
		Name(ev.Name).Body(ev).Do(context.Background()).Into(out)
	return out, err
}

func (e EventSink) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := e.k.rest.Patch(types.StrategicMergePatchType).NamespaceIfScoped(ev.Namespace, ev.Namespace != "").
		Resource("events").Name(ev.Name).Body(data).Do(context.Background()).Into(out)
	return out, err
}

// NewGroupClient is a REST client for one group version over scheme, sharing hc: what the
// generated typed clients are, without linking every group's types. It is the one way nodeaddr
// builds an API client: the agent's core/v1 client, its scraper reviews (cmd/nodeaddr/review.go)
// and the central approver's five groups (internal/csrapproval/api.go). Measured on 2026-12-05, a
// clientset would take the stripped binary from 21.1 MB to 33.1 MB, and client-go's
// leaderelection alone to 23.5 MB.
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

// ServiceNetwork reads the cluster's Service network: the CIDRs of its ServiceCIDR objects
// (networking.k8s.io/v1, served from Kubernetes 1.33 on; an older API server answers 404, which is
// not an error) and the kubernetes Service's ClusterIPs (as single-address prefixes). The agent
// excludes them, so that a ClusterIP on a host interface never becomes the Node's address.
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
	body, err := k.rest.Get().AbsPath("/apis/networking.k8s.io/v1/servicecidrs").SetHeader("Accept", "application/json").Do(ctx).Raw()
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("list servicecidrs: %w", err)
	default:
		var l networkingv1.ServiceCIDRList
		if err := json.Unmarshal(body, &l); err != nil {
			return nil, fmt.Errorf("list servicecidrs: %w", err)
		}
		for _, sc := range l.Items {
			for _, c := range sc.Spec.CIDRs {
				add(c, false)
			}
		}
	}
	body, err = k.rest.Get().AbsPath("/api/v1/namespaces/default/services/kubernetes").SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return out, fmt.Errorf("get the kubernetes service: %w", err)
	}
	var svc corev1.Service
	if err := json.Unmarshal(body, &svc); err != nil {
		return out, fmt.Errorf("get the kubernetes service: %w", err)
	}
	for _, ip := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
		add(ip, true)
	}
	return out, nil
}
