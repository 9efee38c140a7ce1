// Package remediation evicts the hostNetwork pods that a renumbering left on their Node's old
// address (`nodeaddr remediator`, one leader-elected Deployment for the cluster): a hostNetwork
// pod's process keeps the address it started with and its status.podIPs rarely follow
// (kubernetes#93897), so only a new pod gets the new address. It evicts through the Eviction API, so PodDisruptionBudgets hold, once
// the Node's addresses have held for a grace period, bounded per Node and cluster-wide; the
// decision is verdict.Decide, which `kubectl nodeaddr stale` prints too.
package remediation

// The controller: informers hold every Node and every hostNetwork pod (a field selector), so a
// decision reads no API; the only requests after the informers' start are the evictions. The
// queue is keyed by Node: a change of one Node's addresses re-examines only its pods.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/internal/workers"
)

// Source is what the remediator reads and writes: ListerWatchers, which API.Source builds without a
// clientset, and tests on a fake one.
type Source struct {
	Nodes, Pods cache.ListerWatcher // every Node; the hostNetwork pods
	// Evict posts an Eviction for the pod (a 429 is an apierrors TooManyRequests).
	Evict func(ctx context.Context, p *corev1.Pod) error
}

// Config configures a Controller.
type Config struct {
	Source   Source
	Recorder record.EventRecorder
	Metrics  *Metrics
	Logger   *slog.Logger
	Now      func() time.Time
	// Grace is how long a Node's new addresses must hold before its stale pods are evicted.
	Grace time.Duration
	// MaxPerNode and MaxInFlight bound the evictions in flight (evicted, the pod not gone yet) on
	// one Node and in the cluster.
	MaxPerNode, MaxInFlight int
	// Backoff is the first wait after a refused eviction (429), doubled up to MaxBackoff, jittered.
	Backoff, MaxBackoff time.Duration
	// InFlightTimeout: an evicted pod that is still not gone after it no longer counts against the
	// bounds (a pod on a Node whose kubelet is down stays terminating).
	InFlightTimeout time.Duration
	Workers         int
}

// Controller evicts the stale hostNetwork pods verdict.Decide says to evict.
type Controller struct {
	cfg         Config
	queue       workqueue.TypedRateLimitingInterface[string]
	nodes, pods cache.SharedIndexInformer
	ready       atomic.Bool
	start       time.Time
	onNode      cache.ResourceEventHandler // the Node informer's handler (tests call it)
	mu          sync.Mutex
	state
}

// byNode indexes pods by spec.nodeName.
const byNode = "node"

// NewController builds the informers and the queue; nothing runs until Run.
func NewController(cfg Config) (*Controller, error) {
	if cfg.Source.Nodes == nil || cfg.Source.Pods == nil || cfg.Source.Evict == nil {
		return nil, errors.New("remediator: Nodes, Pods and Evict are required")
	}
	if cfg.Grace <= 0 || cfg.MaxPerNode <= 0 || cfg.MaxInFlight <= 0 {
		return nil, errors.New("remediator: Grace, MaxPerNode and MaxInFlight must be positive")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	cfg.Backoff = cmp.Or(cfg.Backoff, 5*time.Second)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, 5*time.Minute)
	cfg.InFlightTimeout = cmp.Or(cfg.InFlightTimeout, 10*time.Minute)
	cfg.Workers = cmp.Or(cfg.Workers, 2)
	c := &Controller{cfg: cfg, start: cfg.Now(), state: newState(), queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "remediator"})}
	c.nodes = cache.NewSharedIndexInformer(cfg.Source.Nodes, &corev1.Node{}, 0, cache.Indexers{})
	c.pods = cache.NewSharedIndexInformer(cfg.Source.Pods, &corev1.Pod{}, 0, cache.Indexers{byNode: podNode})
	cfg.Metrics.oldest = c.oldestStale
	return c, c.addHandlers()
}

func podNode(o any) ([]string, error) {
	if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}

// slim keeps of a cached object what the decision reads: no managedFields but the agent's status
// entry (verdict.AddressesChanged), and of a Node no images or conditions.
func slim(o any) (any, error) {
	switch t := o.(type) {
	case *corev1.Node:
		t.ManagedFields = slices.DeleteFunc(t.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
			m.FieldsV1 = nil
			return m.Manager != vocab.FieldManager || m.Subresource != "status"
		})
		for i := range t.ManagedFields {
			t.ManagedFields[i].FieldsV1 = nil
		}
		t.Status.Images, t.Status.Conditions = nil, nil
	case *corev1.Pod:
		t.ManagedFields = nil
	default:
		if m, err := meta.Accessor(o); err == nil {
			m.SetManagedFields(nil)
		}
	}
	return o, nil
}

func (c *Controller) addHandlers() error {
	nodeH := cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if n, ok := o.(*corev1.Node); ok {
				c.observe(n)
				c.queue.Add(n.Name)
			}
		},
		UpdateFunc: func(old, o any) {
			a, ok1 := old.(*corev1.Node)
			b, ok2 := o.(*corev1.Node)
			if !ok1 || !ok2 {
				return
			}
			c.observe(b)
			if !slices.Equal(ipSet(a), ipSet(b)) {
				c.mu.Lock()
				c.changed[b.Name] = c.cfg.Now()
				c.mu.Unlock()
				c.queue.Add(b.Name)
			}
		},
		DeleteFunc: func(o any) {
			if name, err := cache.DeletionHandlingMetaNamespaceKeyFunc(o); err == nil {
				c.mu.Lock()
				delete(c.changed, name)
				delete(c.history, name)
				c.mu.Unlock()
				c.queue.Add(name)
			}
		},
	}
	c.onNode = nodeH
	podH := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.enqueuePod(o) },
		UpdateFunc: func(_, o any) { c.enqueuePod(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			p, ok := o.(*corev1.Pod)
			if !ok {
				return
			}
			for _, n := range c.podGone(p.UID) {
				c.queue.Add(n)
			}
			c.queue.Add(p.Spec.NodeName)
		},
	}
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{{c.nodes, nodeH}, {c.pods, podH}} {
		if err := h.inf.SetTransform(slim); err != nil {
			return err
		}
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return err
		}
	}
	return nil
}

// observe records n's InternalIP/ExternalIP set in its History (verdict.Renumbered), in memory:
// what the informer sees from the controller's start.
func (c *Controller) observe(n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history[n.Name] = c.history[n.Name].Observe(n, c.cfg.Now())
}

func (c *Controller) enqueuePod(o any) {
	if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		c.queue.Add(p.Spec.NodeName)
	}
}

// ipSet is a Node's IP addresses, sorted: what a pod's IPs are compared with.
func ipSet(n *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// Ready reports whether the informers have synced.
func (c *Controller) Ready() error {
	if !c.ready.Load() {
		return errors.New("remediator: informers not synced")
	}
	return nil
}

// Run starts the informers, waits for them, and remediates until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	var informers sync.WaitGroup
	defer informers.Wait()
	for _, inf := range []cache.SharedIndexInformer{c.nodes, c.pods} {
		informers.Go(func() { inf.RunWithContext(ctx) })
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.nodes.HasSynced, c.pods.HasSynced) {
		return fmt.Errorf("remediator: informers did not sync: %w", context.Cause(ctx))
	}
	c.ready.Store(true)
	c.cfg.Logger.Info("remediator running", "grace", c.cfg.Grace, "max_per_node", c.cfg.MaxPerNode, "max_in_flight", c.cfg.MaxInFlight)
	workers.Run(ctx, c.queue, c.cfg.Workers, c.Sync, c.cfg.Logger, "stale pods of a node not handled, retrying")
	return nil
}

// nodeRef is the Node the remediator's Events are about.
func nodeRef(node string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)}
}
