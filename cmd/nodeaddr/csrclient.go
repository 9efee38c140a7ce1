package main

import (
	"context"
	"fmt"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/internal/kube"
)

// csrClient is what the kubelet-serving CSR approver (--approve-kubelet-serving-csr) reads and
// writes: certificates.k8s.io/v1 CSRs (list, watch, the approval subresource), Nodes (list) and the
// kubernetes Service's EndpointSlices (discovery.k8s.io/v1), as REST clients over a scheme of those
// types only, like kube.Client (internal/kube): the typed clients would link every API group.
// It implements csrapproval.CSRClient and csrapproval.ClusterReader.
type csrClient struct {
	certs, slices rest.Interface
	nodes         *kube.Client
	params        runtime.ParameterCodec
}

func newCSRClient(cfg *rest.Config, nodes *kube.Client) (*csrClient, error) {
	s := runtime.NewScheme()
	s.AddKnownTypes(certv1.SchemeGroupVersion, &certv1.CertificateSigningRequest{}, &certv1.CertificateSigningRequestList{})
	s.AddKnownTypes(discoveryv1.SchemeGroupVersion, &discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{})
	metav1.AddToGroupVersion(s, certv1.SchemeGroupVersion)
	metav1.AddToGroupVersion(s, discoveryv1.SchemeGroupVersion)
	client := func(gv schema.GroupVersion) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &gv
		c.APIPath = "/apis"
		c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(s, serializer.NewCodecFactory(s)).WithoutConversion()
		rc, err := rest.RESTClientFor(c)
		if err != nil {
			return nil, fmt.Errorf("%s client: %w", gv, err)
		}
		return rc, nil
	}
	certs, err := client(certv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	slices, err := client(discoveryv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &csrClient{certs: certs, slices: slices, nodes: nodes, params: runtime.NewParameterCodec(s)}, nil
}

func (c *csrClient) List(ctx context.Context, opts metav1.ListOptions) (*certv1.CertificateSigningRequestList, error) {
	l := &certv1.CertificateSigningRequestList{}
	err := c.certs.Get().UseProtobufAsDefault().Resource("certificatesigningrequests").
		VersionedParams(&opts, c.params).Timeout(kube.Timeout(opts)).Do(ctx).Into(l)
	return l, err
}

func (c *csrClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.certs.Get().UseProtobufAsDefault().Resource("certificatesigningrequests").
		VersionedParams(&opts, c.params).Timeout(kube.Timeout(opts)).Watch(ctx)
}

// UpdateApproval is the typed client's: PUT on the approval subresource.
func (c *csrClient) UpdateApproval(ctx context.Context, name string, csr *certv1.CertificateSigningRequest, opts metav1.UpdateOptions) (*certv1.CertificateSigningRequest, error) {
	out := &certv1.CertificateSigningRequest{}
	err := c.certs.Put().UseProtobufAsDefault().Resource("certificatesigningrequests").Name(name).
		SubResource("approval").VersionedParams(&opts, c.params).Body(csr).Do(ctx).Into(out)
	return out, err
}

func (c *csrClient) ListNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	return c.nodes.List(ctx, opts)
}

func (c *csrClient) ListEndpointSlices(ctx context.Context, namespace string, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	l := &discoveryv1.EndpointSliceList{}
	err := c.slices.Get().UseProtobufAsDefault().Namespace(namespace).Resource("endpointslices").
		VersionedParams(&opts, c.params).Do(ctx).Into(l)
	return l, err
}
