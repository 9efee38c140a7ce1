// Package csrapproval approves kubelet-serving CertificateSigningRequests centrally: one approver
// for the cluster (`nodeaddr approver`, a leader-elected Deployment), never the per-node agents. A
// kubelet-serving certificate is signed by the cluster CA for server auth, so the right to approve
// one must not sit with credentials that a compromised node holds: admission cannot read a CSR's
// SANs (CEL parses no x509), so any holder of that right can approve anything its policy lets
// through. The agents only publish, on their own Node, the record of the addresses they wrote
// (vocab.RecordAnnotation); the approver decides from that record and from the cluster's view,
// with the rules of csrapproval/rules.
package csrapproval

// The approver: the I/O around rules.Decide. Informers hold every fact (kubelet-serving CSRs,
// Nodes, the kubernetes Service, its EndpointSlices, the ServiceCIDRs), so a decision reads no API:
// a flood of CSRs costs the API server nothing but the approvals. The work queue is keyed by node,
// not by CSR: a node filing a thousand CSRs is one key, decided newest first up to
// MaxPendingPerNode, and never delays another node's key. A change of one Node re-examines only
// that Node's pending CSRs, so k nodes renumbering at once cost O(k) work. It never denies: another
// approver may own what this one leaves pending.

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
	certv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/internal/workers"
)

// SignerFieldSelector narrows the CSR informer to kubelet-serving CSRs.
var SignerFieldSelector = rules.SignerFieldSelector

// Policy is the operator's part of the rules (flags of `nodeaddr approver`).
type Policy = rules.Policy

// Scheme holds what the approver reads and writes, and nothing else.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	add := func(gv schema.GroupVersion, objs ...runtime.Object) {
		s.AddKnownTypes(gv, objs...)
		metav1.AddToGroupVersion(s, gv)
	}
	add(certv1.SchemeGroupVersion, &certv1.CertificateSigningRequest{}, &certv1.CertificateSigningRequestList{})
	add(corev1.SchemeGroupVersion, &corev1.Node{}, &corev1.NodeList{}, &corev1.Service{}, &corev1.ServiceList{},
		&corev1.Event{}, &corev1.EventList{})
	add(discoveryv1.SchemeGroupVersion, &discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{})
	add(networkingv1.SchemeGroupVersion, &networkingv1.ServiceCIDR{}, &networkingv1.ServiceCIDRList{})
	add(coordinationv1.SchemeGroupVersion, &coordinationv1.Lease{}, &coordinationv1.LeaseList{})
	return s
}

// byNode indexes CSRs by the node that asks (Nodes by name is the store's key).
const byNode = "node"

// Source is what the approver reads and writes: ListerWatchers, which API.Source builds without a
// clientset (see API), and tests on a fake one.
type Source struct {
	// Kubelet-serving CSRs, every Node, the kubernetes Service in default and its EndpointSlices,
	// and the ServiceCIDRs (nil where the API server serves none, before 1.33).
	CSRs, Nodes, Services, EndpointSlices, ServiceCIDRs cache.ListerWatcher
	// Approve writes csr, with one Approved condition added, to the approval subresource.
	Approve func(ctx context.Context, csr *certv1.CertificateSigningRequest) error
}

// Config configures a Controller.
type Config struct {
	Source   Source
	Recorder record.EventRecorder
	Metrics  *Metrics
	Logger   *slog.Logger
	Now      func() time.Time
	Policy   Policy
	// ServiceCIDRs are the Service network where the API server serves no ServiceCIDR objects
	// (--service-cidr), added to what the cluster says.
	ServiceCIDRs []netip.Prefix
	// Resync is the informers' resync: every pending CSR is examined again this often, the backstop
	// for a fact that changed on another object (10 minutes when 0).
	Resync time.Duration
	// Workers decide in parallel (2 when 0).
	Workers int
}

// Controller approves the kubelet-serving CSRs that rules.Decide approves.
type Controller struct {
	cfg                           Config
	queue                         workqueue.TypedRateLimitingInterface[string]
	csrs, nodes, services, slices cache.SharedIndexInformer
	cidrs                         cache.SharedIndexInformer // nil without ServiceCIDR objects
	ready                         atomic.Bool

	mu       sync.Mutex
	reported map[string]string // pending CSR → the reason last reported (an Event once per reason)
	// approved: CSR → the resourceVersion this process approved, until the informer shows the
	// approval. A node queued again in between (another of its CSRs, a Node update) finds the CSR
	// still pending in the cache; approving it again would cost a request and a 409 Conflict.
	approved map[string]string
}

// NewController builds the informers and the queue; nothing runs until Run.
func NewController(cfg Config) (*Controller, error) {
	src := cfg.Source
	if src.CSRs == nil || src.Nodes == nil || src.Services == nil || src.EndpointSlices == nil || src.Approve == nil {
		return nil, errors.New("csr approver: CSRs, Nodes, Services, EndpointSlices and Approve are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(prometheus.NewRegistry()) // records what nobody reads
	}
	orDefault(&cfg.Resync, 10*time.Minute)
	orDefault(&cfg.Workers, 2)
	cfg.Policy = cfg.Policy.WithDefaults()
	rl := workqueue.DefaultTypedControllerRateLimiter[string]()
	c := &Controller{cfg: cfg, reported: map[string]string{}, approved: map[string]string{}, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		rl, workqueue.TypedRateLimitingQueueConfig[string]{Name: "csr-approver"})}
	inf := cache.NewSharedIndexInformer
	c.csrs = inf(src.CSRs, &certv1.CertificateSigningRequest{}, cfg.Resync, cache.Indexers{byNode: csrNode})
	c.nodes = inf(src.Nodes, &corev1.Node{}, 0, rules.NodeIndexers())
	c.services = inf(src.Services, &corev1.Service{}, 0, cache.Indexers{})
	c.slices = inf(src.EndpointSlices, &discoveryv1.EndpointSlice{}, 0, cache.Indexers{})
	if src.ServiceCIDRs != nil {
		c.cidrs = inf(src.ServiceCIDRs, &networkingv1.ServiceCIDR{}, 0, cache.Indexers{})
	}
	return c, c.addHandlers()
}

// orDefault sets an unset (zero or negative) option to d.
func orDefault[T int | time.Duration](p *T, d T) {
	if *p <= 0 {
		*p = d
	}
}

// csrNode indexes a kubelet-serving CSR by the node that asks.
func csrNode(o any) ([]string, error) {
	if csr, ok := o.(*certv1.CertificateSigningRequest); ok && rules.NodeOf(csr) != "" {
		return []string{rules.NodeOf(csr)}, nil
	}
	return nil, nil
}

// stripManagedFields drops what the approver never reads from a cached object.
func stripManagedFields(o any) (any, error) {
	if m, err := meta.Accessor(o); err == nil {
		m.SetManagedFields(nil)
	}
	return o, nil
}

func (c *Controller) informers() []cache.SharedIndexInformer {
	out := []cache.SharedIndexInformer{c.csrs, c.nodes, c.services, c.slices}
	if c.cidrs != nil {
		out = append(out, c.cidrs)
	}
	return out
}

// addHandlers sets each informer's transform and event handlers.
func (c *Controller) addHandlers() error {
	// The API server's addresses and the Service network change rarely; when they do, every
	// pending CSR is examined again.
	all := func(any) { c.requeueAll() }
	requeueAll := cache.ResourceEventHandlerFuncs{AddFunc: all, DeleteFunc: all,
		UpdateFunc: func(any, any) { c.requeueAll() }}
	handlers := []cache.ResourceEventHandlerFuncs{{ // CSRs
		AddFunc:    c.onCSR,
		UpdateFunc: func(_, o any) { c.onCSR(o) },
		DeleteFunc: func(o any) {
			if name, err := cache.DeletionHandlingMetaNamespaceKeyFunc(o); err == nil {
				c.forget(name) // a CSR is cluster-scoped: its key is its name
			}
		},
	}, { // Nodes
		AddFunc: c.onNode,
		UpdateFunc: func(old, o any) {
			if nodeFactsChanged(old, o) {
				c.onNode(o)
			}
		},
	}, requeueAll, requeueAll, requeueAll} // Services, EndpointSlices, ServiceCIDRs
	for i, inf := range c.informers() {
		// The approver keeps thousands of Nodes and CSRs: their managedFields are never read.
		if err := inf.SetTransform(stripManagedFields); err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(handlers[i]); err != nil {
			return err
		}
	}
	return nil
}

// onCSR queues the node of a pending kubelet-serving CSR; any other costs one comparison.
func (c *Controller) onCSR(o any) {
	csr, ok := o.(*certv1.CertificateSigningRequest)
	if !ok {
		return
	}
	if !rules.Pending(csr) {
		c.forget(csr.Name)
		return
	}
	if n := rules.NodeOf(csr); n != "" {
		c.queue.Add(n)
	}
}

// onNode queues a Node whose facts changed, when it has CSRs.
func (c *Controller) onNode(o any) {
	if n, ok := o.(*corev1.Node); ok {
		if keys, _ := c.csrs.GetIndexer().IndexKeys(byNode, n.Name); len(keys) > 0 {
			c.queue.Add(n.Name)
		}
	}
}

// nodeFactsChanged: what rules.Decide reads of a Node changed (its addresses or its record).
func nodeFactsChanged(old, o any) bool {
	a, ok1 := old.(*corev1.Node)
	b, ok2 := o.(*corev1.Node)
	return !ok1 || !ok2 || !slices.Equal(a.Status.Addresses, b.Status.Addresses) ||
		a.Annotations[vocab.RecordAnnotation] != b.Annotations[vocab.RecordAnnotation]
}

// requeueAll queues every node with CSRs.
func (c *Controller) requeueAll() {
	for _, n := range c.csrs.GetIndexer().ListIndexFuncValues(byNode) {
		c.queue.Add(n)
	}
}

func (c *Controller) forget(name string) {
	c.mu.Lock()
	delete(c.reported, name)
	delete(c.approved, name)
	c.mu.Unlock()
}

// Ready reports whether the informers have synced and the workers run.
func (c *Controller) Ready() error {
	if !c.ready.Load() {
		return errors.New("csr approver: informers not synced")
	}
	return nil
}

// Run starts the informers, waits for them, and decides until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	var informers sync.WaitGroup
	defer informers.Wait()
	var synced []cache.InformerSynced
	for _, inf := range c.informers() {
		informers.Go(func() { inf.RunWithContext(ctx) })
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("csr approver: informers did not sync: %w", context.Cause(ctx))
	}
	c.ready.Store(true)
	c.cfg.Logger.Info("csr approver running", "workers", c.cfg.Workers, "service_cidr_objects", c.cidrs != nil)
	workers.Run(ctx, c.queue, c.cfg.Workers, c.Sync, c.cfg.Logger, "kubelet serving CSRs of a node not handled, retrying")
	return nil
}
