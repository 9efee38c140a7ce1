package csrapproval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/leader"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// API is the approver's REST clients, one per API group it reads, over Scheme: a clientset links
// every API group's types into the binary the agents also run (cmd/nodeaddr measured 20.6 MB →
// 33.1 MB stripped).
type API struct {
	*leader.Clients
	certs, discovery, net rest.Interface
}

// NewAPI builds the clients on cfg over hc (nil: one of its own).
func NewAPI(cfg *rest.Config, hc *http.Client) (*API, error) {
	c, err := leader.NewClients(cfg, hc, Scheme(), vocab.ApproverFieldManager)
	if err != nil {
		return nil, err
	}
	a := &API{Clients: c}
	for _, g := range []struct {
		c  *rest.Interface
		gv schema.GroupVersion
	}{{&a.certs, certv1.SchemeGroupVersion}, {&a.discovery, discoveryv1.SchemeGroupVersion},
		{&a.net, networkingv1.SchemeGroupVersion}} {
		if *g.c, err = kube.NewGroupClient(cfg, c.Scheme(), c.HTTP, g.gv); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Source is what the controller reads and writes; ServiceCIDRs only where the API server serves them.
func (a *API) Source(ctx context.Context) (Source, error) {
	lw, all := cache.NewFilteredListWatchFromClient, func(*metav1.ListOptions) {}
	src := Source{
		CSRs:  lw(a.certs, "certificatesigningrequests", "", func(o *metav1.ListOptions) { o.FieldSelector = SignerFieldSelector }),
		Nodes: lw(a.Core, "nodes", "", all),
		Services: lw(a.Core, "services", rules.APIServerNamespace, func(o *metav1.ListOptions) {
			o.FieldSelector = rules.APIServerServiceSelector
		}),
		EndpointSlices: lw(a.discovery, "endpointslices", rules.APIServerNamespace, func(o *metav1.ListOptions) {
			o.LabelSelector = rules.APIServerSliceSelector
		}),
		Approve: func(ctx context.Context, csr *certv1.CertificateSigningRequest) error {
			return a.certs.Put().Resource("certificatesigningrequests").Name(csr.Name).SubResource("approval").
				VersionedParams(&metav1.UpdateOptions{FieldManager: vocab.ApproverFieldManager}, metav1.ParameterCodec).
				Body(csr).Do(ctx).Error()
		},
	}
	served, err := a.servesServiceCIDRs(ctx)
	if err != nil {
		return src, err
	}
	if served {
		src.ServiceCIDRs = lw(a.net, "servicecidrs", "", all)
	}
	return src, nil
}

// servesServiceCIDRs reports whether the API server serves networking.k8s.io/v1 ServiceCIDRs (1.33+).
func (a *API) servesServiceCIDRs(ctx context.Context) (bool, error) {
	raw, err := a.net.Get().AbsPath("/apis", networkingv1.SchemeGroupVersion.String()).Do(ctx).Raw()
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	var list metav1.APIResourceList
	if err == nil {
		err = json.Unmarshal(raw, &list)
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", networkingv1.SchemeGroupVersion, err)
	}
	isCIDRs := func(r metav1.APIResource) bool { return r.Name == "servicecidrs" }
	return slices.ContainsFunc(list.APIResources, isCIDRs), nil
}

// startBackoff paces WaitSource: 200 ms doubling to 5 s.
var startBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 5 * time.Second}

// WaitSource is Source, retried while the API server cannot answer yet (Transient), as at install
// before kube-proxy programs the `kubernetes` Service's ClusterIP, until ctx ends. It logs each
// failed attempt at WARN; any other error (401, 403, ...) it returns at once.
func (a *API) WaitSource(ctx context.Context, log *slog.Logger) (Source, error) {
	b := startBackoff
	for {
		src, err := a.Source(ctx)
		if err == nil || !Transient(err) || ctx.Err() != nil {
			return src, err
		}
		d := b.Step()
		log.Warn("the API server does not answer yet; retrying", "err", err, "retry_in", d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return src, fmt.Errorf("%w (stopped waiting: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// Transient reports whether err may pass by itself: no answer from the API server (refused,
// unreachable, reset, timed out) or an answer asking to come back (429, 5xx, server timeout).
// Refusals (401, 403) and other answers are not; neither are TLS failures.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if status := apierrors.APIStatus(nil); errors.As(err, &status) {
		code := status.Status().Code
		return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests ||
			apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
	}
	if op, ok := errors.AsType[*net.OpError](err); ok {
		return op.Op != "remote error" && op.Op != "local error" // crypto/tls's alerts
	}
	_, dns := errors.AsType[*net.DNSError](err)
	return dns || utilnet.IsTimeout(err) || utilnet.IsProbableEOF(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsHTTP2ConnectionLost(err)
}
