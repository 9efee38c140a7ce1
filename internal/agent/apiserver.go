package agent

// The API server's own addresses, for the apiserver target (resolver/stage_apiserver.go): the
// kubeconfig's server when it is not the Service's ClusterIP (Config.APIServer.Static, from the
// command), then the ready endpoints of the kubernetes Service's EndpointSlice in `default`, followed
// with an informer narrowed to that one object (metadata.name, which RBAC's resourceNames can
// authorize for list and watch; deploy/rbac.yaml).

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// The kubernetes Service's EndpointSlice: the API server's own reconciler names it after the Service.
const (
	apiServerNamespace = "default"
	apiServerSlice     = "kubernetes"
	serviceNameLabel   = discoveryv1.LabelServiceName + "=" + apiServerSlice
)

// EndpointSliceClient lists and watches the EndpointSlices of `default` (internal/kube).
type EndpointSliceClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// APIServerConfig is where the apiserver target's addresses come from.
type APIServerConfig struct {
	// Static are addresses known at start: the kubeconfig's server when it is an IP other than the
	// kubernetes Service's ClusterIP (the command decides), first in the list.
	Static []netip.Addr
	// Slices, if set, is followed for the kubernetes Service's endpoints (nil in a dry run).
	Slices EndpointSliceClient
}

// apiServerView is the informer's view of the kubernetes EndpointSlice. Until its first list has
// answered (synced or failed), the addresses are not settled and the first resolution waits, so
// that the Node is not given the fallback's address for the moment the endpoints take to arrive.
type apiServerView struct {
	cfg      APIServerConfig
	informer cache.SharedIndexInformer // nil without Slices
	synced   cache.InformerSynced
	log      *slog.Logger
	kick     func() // the loop looks again (Loop.NodeChanged)

	mu     sync.Mutex
	failed bool // the last list failed: the fallback targets serve until one succeeds
}

func newAPIServerView(cfg APIServerConfig, log *slog.Logger) *apiServerView {
	v := &apiServerView{cfg: cfg, log: log, kick: func() {}}
	if cfg.Slices == nil {
		return v
	}
	selector := fields.OneTermEqualSelector("metadata.name", apiServerSlice).String()
	narrow := func(o *metav1.ListOptions) { o.FieldSelector, o.LabelSelector = selector, serviceNameLabel }
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			narrow(&o)
			l, err := cfg.Slices.List(ctx, o)
			if ctx.Err() == nil {
				v.listed(err)
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			narrow(&o)
			return cfg.Slices.Watch(ctx, o)
		},
	}
	v.informer = cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, cfg.Slices),
		&discoveryv1.EndpointSlice{}, 0, cache.Indexers{})
	return v
}

// listed records a list's outcome: a failure settles the addresses as the static ones alone.
func (v *apiServerView) listed(err error) {
	v.mu.Lock()
	was := v.failed
	v.failed = err != nil
	v.mu.Unlock()
	if err != nil && !was {
		v.log.Warn("the kubernetes EndpointSlice cannot be read: the apiserver target uses the kubeconfig's server, if any, else the next target",
			"namespace", apiServerNamespace, "name", apiServerSlice, "err", err)
		v.kick()
	}
}

// start adds the handler that kicks the loop on every change; Run calls it before the informer runs.
func (v *apiServerView) start(kick func()) error {
	v.kick = kick
	if v.informer == nil {
		return nil
	}
	reg, err := v.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kick() },
		UpdateFunc: func(any, any) { kick() },
		DeleteFunc: func(any) { kick() },
	})
	v.synced = reg.HasSynced
	return err
}

// run runs the informer and kicks the loop once it has synced (an empty list adds nothing).
func (v *apiServerView) run(ctx context.Context) {
	if v.informer == nil {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { v.informer.RunWithContext(ctx) })
	if cache.WaitForCacheSync(ctx.Done(), v.synced) {
		v.kick()
	}
}

// addresses are the API server's addresses, ok false while the first list has not answered.
func (v *apiServerView) addresses() ([]netip.Addr, bool) {
	out := slices.Clone(v.cfg.Static)
	if v.informer == nil {
		return out, true
	}
	v.mu.Lock()
	failed := v.failed
	v.mu.Unlock()
	if !v.synced() {
		return out, failed
	}
	for _, o := range v.informer.GetStore().List() {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = appendEndpoints(out, s)
		}
	}
	return out, true
}

// appendEndpoints adds s's ready endpoint addresses, sorted, each once, after out's.
func appendEndpoints(out []netip.Addr, s *discoveryv1.EndpointSlice) []netip.Addr {
	var eps []netip.Addr
	for _, e := range s.Endpoints {
		if e.Conditions.Ready != nil && !*e.Conditions.Ready {
			continue
		}
		for _, a := range e.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil && !slices.Contains(out, ip.Unmap()) && !slices.Contains(eps, ip.Unmap()) {
				eps = append(eps, ip.Unmap())
			}
		}
	}
	slices.SortFunc(eps, netip.Addr.Compare)
	return append(out, eps...)
}

// listOnce reads the addresses with one list (--run-once); a failure leaves the static ones.
func (v *apiServerView) listOnce(ctx context.Context) []netip.Addr {
	out := slices.Clone(v.cfg.Static)
	if v.cfg.Slices == nil {
		return out
	}
	l, err := v.cfg.Slices.List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", apiServerSlice).String(), LabelSelector: serviceNameLabel})
	if err != nil {
		v.listed(err)
		return out
	}
	for i := range l.Items {
		out = appendEndpoints(out, &l.Items[i])
	}
	return out
}
