package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/inspect"
)

// reprobeAfter is how long after a CSR changes the kubelet certificates are read once more: the
// kubelet loads a newly issued certificate a moment after the CSR shows it, and nothing in the API
// announces that moment.
const reprobeAfter = 3 * time.Second

// watchStale lists, then re-evaluates whenever a Node's addresses, a hostNetwork pod, an
// EndpointSlice or a kubelet-serving CSR changes, or a pending CSR crosses --pending-after, and prints
// the findings each time they change. Informers without resync: nothing is polled. It returns when
// ctx ends, with the exit code of the last evaluation.
func (s *staleOptions) watchStale(ctx context.Context, cs kubernetes.Interface, names []string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dirty := make(chan struct{}, 1)
	signal := func() {
		select {
		case dirty <- struct{}{}:
		default:
		}
	}
	// Read the Nodes once first: a named Node that does not exist, or an API server that cannot be
	// reached, ends the command (exit 3) where the informers would retry without a word (a refused
	// connection to a watch is retried, not returned).
	if _, err := getNodes(ctx, cs, names); err != nil {
		return err
	}
	w, err := startWatches(ctx, cs, signal)
	if err != nil {
		return err
	}
	want := nodeNames(names)
	var last []inspect.Finding
	printed := false
	var timer *time.Timer
	for {
		snap := w.snapshot(want, s.pendingAfter)
		if anyPending(snap.CSRs) {
			all, _ := w.nodes.List(labels.Everything())
			snap.Approval, snap.ApprovalUnknown = approvalFacts(ctx, cs, all, true)
		}
		if s.probe {
			snap.Certs = w.certs.get(ctx, snap.Nodes, s.timeout)
		}
		found := inspect.Stale(snap)
		if !printed || !reflect.DeepEqual(found, last) {
			fmt.Fprintf(s.stderr, "%s: %d stale\n", snap.Now.UTC().Format(time.RFC3339), countStale(found))
			if err := s.print(s.stdout, found); err != nil {
				return err
			}
			last, printed = found, true
		}
		if timer != nil {
			timer.Stop()
		}
		if d, ok := nextPending(snap.CSRs, snap.Now, s.pendingAfter); ok {
			timer = time.AfterFunc(d, signal)
		}
		select {
		case <-ctx.Done():
			return staleExit(last)
		case <-dirty:
		}
	}
}

// watches are the informers stale --watch reads, and the certificates it read last.
type watches struct {
	nodes corelisters.NodeLister
	pods  corelisters.PodLister
	eps   discoverylisters.EndpointSliceLister
	csrs  certlisters.CertificateSigningRequestLister
	certs *certCache
}

// startWatches starts the informers, each calling signal on the changes that matter, and waits for
// their caches. A CSR change also invalidates the certificates, now and once more reprobeAfter later.
// An error before the caches are filled (API server unreachable, forbidden) is returned, so that the
// command ends with "cannot tell" instead of retrying silently; once they are, the informers retry
// as usual.
func startWatches(ctx context.Context, cs kubernetes.Interface, signal func()) (*watches, error) {
	w := &watches{certs: &certCache{}}
	factory := informers.NewSharedInformerFactory(cs, 0)
	csrFactory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = rules.SignerFieldSelector }))
	nodes, pods := factory.Core().V1().Nodes(), factory.Core().V1().Pods()
	eps, csrs := factory.Discovery().V1().EndpointSlices(), csrFactory.Certificates().V1().CertificateSigningRequests()
	w.nodes, w.pods, w.eps, w.csrs = nodes.Lister(), pods.Lister(), eps.Lister(), csrs.Lister()
	csrChanged := func() {
		w.certs.invalidate()
		signal()
		time.AfterFunc(reprobeAfter, func() { w.certs.invalidate(); signal() })
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{nodes.Informer(), onChange(signal, nil, nodeChanged)},
		{pods.Informer(), onChange(signal, hostNetwork, nil)},
		{eps.Informer(), onChange(signal, nil, nil)},
		{csrs.Informer(), onChange(csrChanged, nil, nil)},
	}
	syncCtx, failed := context.WithCancelCause(ctx)
	defer failed(nil)
	var synced atomic.Bool
	onError := func(ctx context.Context, r *cache.Reflector, err error) {
		// An expired resource version or a closed watch is routine: the reflector lists again.
		routine := apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if !synced.Load() && !routine {
			failed(err)
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
		if err := h.inf.SetWatchErrorHandlerWithContext(onError); err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
	}
	factory.Start(ctx.Done())
	csrFactory.Start(ctx.Done())
	for _, h := range handlers {
		if !cache.WaitForCacheSync(syncCtx.Done(), h.inf.HasSynced) {
			if ctx.Err() != nil { // interrupted
				return nil, fmt.Errorf("watch: caches did not sync: %w", context.Cause(ctx))
			}
			return nil, context.Cause(syncCtx)
		}
	}
	synced.Store(true)
	return w, nil
}

// snapshot is what the caches hold now, for the named Nodes (want nil: every Node). Listing a
// cache with labels.Everything() cannot fail.
func (w *watches) snapshot(want map[string]bool, pendingAfter time.Duration) inspect.Snapshot {
	snap := inspect.Snapshot{AllNodes: want == nil, Now: time.Now(), PendingAfter: pendingAfter}
	nodes, _ := w.nodes.List(labels.Everything())
	pods, _ := w.pods.List(labels.Everything())
	eps, _ := w.eps.List(labels.Everything())
	csrs, _ := w.csrs.List(labels.Everything())
	snap.Nodes, snap.Pods, snap.Slices, snap.CSRs = selected(nodes, want), derefs(pods), derefs(eps), derefs(csrs)
	return snap
}

// onChange signals for every add, update and delete of a relevant object (relevant nil: every
// object), and for an update only when changed says so (changed nil: every update).
func onChange(signal func(), relevant func(any) bool, changed func(old, o any) bool) cache.ResourceEventHandler {
	rel := func(o any) bool {
		if _, tomb := o.(cache.DeletedFinalStateUnknown); tomb || relevant == nil {
			return true
		}
		return relevant(o)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if rel(o) {
				signal()
			}
		},
		UpdateFunc: func(old, o any) {
			if (rel(old) || rel(o)) && (changed == nil || changed(old, o)) {
				signal()
			}
		},
		DeleteFunc: func(o any) {
			if rel(o) {
				signal()
			}
		},
	}
}

// nodeChanged: the rules read only a Node's addresses and kubelet port; heartbeats and condition
// updates do not matter.
func nodeChanged(old, o any) bool {
	a, okA := old.(*corev1.Node)
	b, okB := o.(*corev1.Node)
	return !okA || !okB || !equality.Semantic.DeepEqual(a.Status.Addresses, b.Status.Addresses) ||
		a.Status.DaemonEndpoints != b.Status.DaemonEndpoints
}

func hostNetwork(o any) bool {
	p, ok := o.(*corev1.Pod)
	return !ok || p.Spec.HostNetwork
}

func derefs[T any](ptrs []*T) []T {
	out := make([]T, len(ptrs))
	for i, p := range ptrs {
		out[i] = *p
	}
	return out
}

func countStale(found []inspect.Finding) int {
	n := 0
	for _, f := range found {
		if f.State == inspect.StateStale {
			n++
		}
	}
	return n
}

// nextPending is how long until the next pending kubelet-serving CSR crosses after (ok false: none
// will).
func nextPending(csrs []certificatesv1.CertificateSigningRequest, now time.Time, after time.Duration) (time.Duration, bool) {
	var next time.Duration
	found := false
	for _, c := range csrs {
		if len(c.Status.Conditions) > 0 {
			continue
		}
		d := c.CreationTimestamp.Add(after).Sub(now) + time.Second // metav1.Time has second precision
		if d > 0 && (!found || d < next) {
			next, found = d, true
		}
	}
	return next, found
}
