package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// The agent talks to two resources, Nodes and Events of core/v1. A clientset
// (k8s.io/client-go/kubernetes) would link every API group and register all of them in a scheme at
// start, which costs binary pages and heap for nothing; this is the same REST client the generated
// typed clients use, over a scheme that knows only what the agent sends and receives.

// kubeScheme holds core/v1 Node and Event (and their lists), PodList for --check-install, the
// option types the requests carry, and WatchEvent/Status. The event recorder also uses it to turn a
// Node into an object reference.
func kubeScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(corev1.SchemeGroupVersion,
		&corev1.Node{}, &corev1.NodeList{}, &corev1.Event{}, &corev1.EventList{}, &corev1.Pod{}, &corev1.PodList{})
	metav1.AddToGroupVersion(s, corev1.SchemeGroupVersion)
	return s
}

// kubeClient is a REST client for the core/v1 API group, implementing publisher.NodeClient and
// record.EventSink.
type kubeClient struct {
	rest   rest.Interface
	params runtime.ParameterCodec
}

func newKubeClient(cfg *rest.Config, scheme *runtime.Scheme) (*kubeClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.APIPath = "/api"
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &kubeClient{rest: rc, params: runtime.NewParameterCodec(scheme)}, nil
}

// The Node methods are those of the generated typed client (k8s.io/client-go/gentype), which
// prefers protobuf for core types.

func (k *kubeClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error) {
	n := &corev1.Node{}
	err := k.rest.Get().UseProtobufAsDefault().Resource("nodes").Name(name).
		VersionedParams(&opts, k.params).Do(ctx).Into(n)
	return n, err
}

func (k *kubeClient) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	l := &corev1.NodeList{}
	err := k.rest.Get().UseProtobufAsDefault().Resource("nodes").VersionedParams(&opts, k.params).
		Timeout(timeout(opts)).Do(ctx).Into(l)
	return l, err
}

func (k *kubeClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return k.rest.Get().UseProtobufAsDefault().Resource("nodes").VersionedParams(&opts, k.params).
		Timeout(timeout(opts)).Watch(ctx)
}

func (k *kubeClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error) {
	n := &corev1.Node{}
	err := k.rest.Patch(pt).UseProtobufAsDefault().Resource("nodes").Name(name).SubResource(subresources...).
		VersionedParams(&opts, k.params).Body(data).Do(ctx).Into(n)
	return n, err
}

func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

// events is the event broadcaster's sink: record.EventSink on the same client, writing each Event
// to its own namespace as typedcorev1.EventSinkImpl does.
type events struct{ k *kubeClient }

func (e events) Create(ev *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := e.k.rest.Post().NamespaceIfScoped(ev.Namespace, ev.Namespace != "").Resource("events").
		Body(ev).Do(context.Background()).Into(out)
	return out, err
}

func (e events) Update(ev *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := e.k.rest.Put().NamespaceIfScoped(ev.Namespace, ev.Namespace != "").Resource("events").
		Name(ev.Name).Body(ev).Do(context.Background()).Into(out)
	return out, err
}

func (e events) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := e.k.rest.Patch(types.StrategicMergePatchType).NamespaceIfScoped(ev.Namespace, ev.Namespace != "").
		Resource("events").Name(ev.Name).Body(data).Do(context.Background()).Into(out)
	return out, err
}
