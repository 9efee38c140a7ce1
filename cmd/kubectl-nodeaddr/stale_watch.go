package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/inspect"
)

// stale --watch: informers that signal, and a re-evaluation on each change that matters.

// reprobeAfter is how long after a CSR changes the kubelet certificates are read once more: the
// kubelet loads a newly issued certificate a moment after the CSR shows it, and nothing in the API
// announces that moment.
const reprobeAfter = 3 * time.Second

// watchStale re-evaluates on every change that matters (informers without resync: nothing is
// polled) and prints the findings when they change, until ctx ends, with the last exit code.
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
	w, err := startWatches(ctx, cs, signal, s.certs.invalidate)
	if err != nil {
		return err
	}
	var last []inspect.Finding
	printed := false
	var timer *time.Timer
	for {
		snap, all := w.snapshot(names, s.pendingAfter)
		found := s.evaluate(ctx, cs, snap, all, true)
		if !printed || !reflect.DeepEqual(found, last) {
			fmt.Fprintf(s.stderr, "%s: %d stale\n", snap.Now.UTC().Format(time.RFC3339), inspect.CountStale(found))
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

// watches are the informers stale --watch reads.
type watches struct{ nodes, pods, eps, csrs cache.SharedIndexInformer }

// startWatches starts the informers, calling signal on the changes that matter (and invalidate on
// a CSR's, now and reprobeAfter later), and waits for their caches. An error before they are filled
// is returned (exit 3) instead of retried silently; after, the informers retry as usual.
func startWatches(ctx context.Context, cs kubernetes.Interface, signal, invalidate func()) (*watches, error) {
	factory := informers.NewSharedInformerFactory(cs, 0)
	csrFactory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = rules.SignerFieldSelector }))
	w := &watches{factory.Core().V1().Nodes().Informer(), factory.Core().V1().Pods().Informer(),
		factory.Discovery().V1().EndpointSlices().Informer(),
		csrFactory.Certificates().V1().CertificateSigningRequests().Informer()}
	csrChanged := func() {
		invalidate()
		signal()
		time.AfterFunc(reprobeAfter, func() { invalidate(); signal() })
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{w.nodes, on(signal, nodeChanged)},
		{w.pods, cache.FilteringResourceEventHandler{FilterFunc: hostNetwork, Handler: on(signal, nil)}},
		{w.eps, on(signal, nil)},
		{w.csrs, on(csrChanged, nil)},
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

// snapshot is what the caches hold now, for the named Nodes (none: every Node), and every Node.
func (w *watches) snapshot(names []string, pendingAfter time.Duration) (inspect.Snapshot, []*corev1.Node) {
	snap := inspect.Snapshot{AllNodes: len(names) == 0, Now: time.Now(), PendingAfter: pendingAfter}
	nodes := cached[corev1.Node](w.nodes)
	for _, n := range nodes {
		if len(names) == 0 || slices.Contains(names, n.Name) {
			snap.Nodes = append(snap.Nodes, n)
		}
	}
	snap.Pods, snap.Slices = cached[corev1.Pod](w.pods), cached[discoveryv1.EndpointSlice](w.eps)
	snap.CSRs = cached[certificatesv1.CertificateSigningRequest](w.csrs)
	return snap, ptrs(nodes)
}

// on signals for every add, update and delete, and for an update only when changed says so (nil: always).
func on(signal func(), changed func(old, o any) bool) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { signal() },
		UpdateFunc: func(old, o any) {
			if changed == nil || changed(old, o) {
				signal()
			}
		},
		DeleteFunc: func(any) { signal() },
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

// hostNetwork: only hostNetwork pods keep an old address (a deleted pod's tombstone may be one).
func hostNetwork(o any) bool {
	p, ok := o.(*corev1.Pod)
	return !ok || p.Spec.HostNetwork
}

// cached copies the objects in an informer's cache.
func cached[T any](inf cache.SharedIndexInformer) []T {
	var out []T
	for _, o := range inf.GetStore().List() {
		out = append(out, *o.(*T))
	}
	return out
}

// nextPending is how long until the next pending CSR crosses after (ok false: none will).
func nextPending(csrs []certificatesv1.CertificateSigningRequest, now time.Time, after time.Duration) (time.Duration, bool) {
	var next time.Duration
	for _, c := range csrs {
		d := c.CreationTimestamp.Add(after).Sub(now) + time.Second // metav1.Time has second precision
		if len(c.Status.Conditions) == 0 && d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next, next > 0
}
