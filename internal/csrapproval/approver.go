package csrapproval

// The approver: the I/O around Decide. It reads kubelet-serving CSRs (a field selector on
// spec.signerName: CSRs are cluster-scoped and nothing narrows a read to one requester, so every read
// returns every node's kubelet-serving CSRs; it keeps only its own Node's) while a window is open
// (window.go) and once per backstop interval, gathers the Facts only when a CSR of its own Node needs
// deciding, approves, or says once why not. It never denies: another approver may own what this one
// leaves pending.

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// Event reasons on the agent's Node (stable: alerts and runbooks match on them).
const (
	// EventApproved (Normal): the agent approved its kubelet's serving CSR.
	EventApproved = "KubeletServingCSRApproved"
	// EventPending (Warning): a kubelet-serving CSR of the agent's Node breaks a rule and is left
	// pending; the message names the rule (a Reason constant) and the CSR.
	EventPending = "KubeletServingCSRPending"
	// ApprovalReason is the reason of the Approved condition the agent adds.
	ApprovalReason = "NodeaddrApproved"
)

// CSRClient is what the approver does with CSRs: the subset of client-go's typed
// CertificateSigningRequestInterface it uses.
type CSRClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*certv1.CertificateSigningRequestList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	UpdateApproval(ctx context.Context, name string, csr *certv1.CertificateSigningRequest, opts metav1.UpdateOptions) (*certv1.CertificateSigningRequest, error)
}

// Observer receives what metrics need.
type Observer interface {
	// OnCSRPending counts a CSR of the agent's Node left pending, by reason (once per CSR).
	OnCSRPending(reason string)
	// OnCSRApproved counts an approval and observes the time from the CSR's creation.
	OnCSRApproved(latency time.Duration)
}

// Own is the agent's first-hand state: the addresses nodeaddr publishes for its Node from its own
// resolution, and the Node as its informer has it (nil until it is known).
type Own func() (published []netip.Addr, node *corev1.Node)

// Config configures an Approver.
type Config struct {
	// Node is the agent's Node name.
	Node string
	// CSRs reads and approves CSRs; Cluster reads the other Nodes and the API server's endpoints.
	CSRs    CSRClient
	Cluster ClusterReader
	// Own is the agent's own state (internal/agent: the publisher's desired addresses and the
	// Node informer's view).
	Own      Own
	Recorder record.EventRecorder
	Observer Observer
	Logger   *slog.Logger
	// Now is the clock of the approval latency and of the window (time.Now when nil).
	Now func() time.Time
	// Window is how long the approver watches CSRs after each opening (the agent's start, a change
	// of the Node's addresses) unless the Node's newest CSR is decided first; DefaultWindow when 0.
	Window time.Duration
	// Backstop is the interval of the one LIST that catches CSRs filed outside a window (the
	// kubelet's certificate rotation): DefaultBackstop when 0, none when negative. With Kubelet set,
	// it LISTs only while the kubelet's serving certificate says a CSR may come (CertState).
	Backstop time.Duration
	// Kubelet reads the serving certificate of this host's kubelet (TLSProbe in the agent); nil:
	// never read, and the backstop LISTs at every interval.
	Kubelet KubeletCert
	// ProbeInterval is how often Kubelet is read: DefaultProbeInterval when 0.
	ProbeInterval time.Duration
}

// DefaultProbeInterval is how often the agent reads its kubelet's serving certificate: a local TLS
// handshake, no request to the API server.
const DefaultProbeInterval = time.Minute

// Approver approves the kubelet-serving CSRs of its agent's Node that Decide approves.
type Approver struct {
	cfg   Config
	queue workqueue.TypedInterface[string]
	kick  chan struct{} // one slot: the window opened, or may have settled

	mu  sync.Mutex
	win window
	// csrs are the Node's own kubelet-serving CSRs (any state) as last listed or watched.
	csrs     map[string]*certv1.CertificateSigningRequest
	reported map[string]bool // CSRs whose pending reason was reported (once per CSR)
	failures map[string]int  // consecutive failed attempts per CSR
	// decidedOn is the own state (ownState) each pending CSR was last decided on.
	decidedOn map[string]string
	// cert is what the kubelet's serving certificate says (probe), seen and seenKey the latest
	// probe's state and certificate and addresses, uncovered those for which CertUncovered last
	// opened the window.
	cert, seen         CertState
	seenKey, uncovered string
}

// SignerFieldSelector narrows the watch to kubelet-serving CSRs, the only selector CSRs support
// besides metadata.name.
var SignerFieldSelector = fields.OneTermEqualSelector("spec.signerName", certv1.KubeletServingSignerName).String()

// New builds the approver; nothing runs until Run.
func New(cfg Config) (*Approver, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Backstop == 0 {
		cfg.Backstop = DefaultBackstop
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.CSRs == nil || cfg.Cluster == nil || cfg.Own == nil {
		return nil, fmt.Errorf("csr approver of %s: CSRs, Cluster and Own are required", cfg.Node)
	}
	return &Approver{
		cfg:       cfg,
		queue:     workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: ""}),
		kick:      make(chan struct{}, 1),
		win:       window{span: cfg.Window, minOpen: min(minOpen, cfg.Window)},
		csrs:      map[string]*certv1.CertificateSigningRequest{},
		reported:  map[string]bool{},
		failures:  map[string]int{},
		decidedOn: map[string]string{},
		cert:      CertUnknown,
	}, nil
}

// mine reports whether csr is a kubelet-serving CSR filed by this Node (in any state): the only
// ones the approver keeps.
func (a *Approver) mine(csr *certv1.CertificateSigningRequest) bool {
	return csr.Spec.SignerName == certv1.KubeletServingSignerName && csr.Spec.Username == "system:node:"+a.cfg.Node
}

// enqueue queues a CSR that is this Node's and undecided; the others cost one comparison.
func (a *Approver) enqueue(csr *certv1.CertificateSigningRequest) {
	if Decide(csr, Facts{Node: a.cfg.Node}).Ours {
		a.queue.Add(csr.Name)
	}
}

// forget drops what the approver remembers of a CSR that is gone; a.mu held.
func (a *Approver) forget(name string) {
	delete(a.csrs, name)
	delete(a.reported, name)
	delete(a.failures, name)
	delete(a.decidedOn, name)
}

// Open opens the watch window (or extends it): the kubelet is expected to file a serving CSR soon.
// The window starts with a LIST. Run opens it at the start.
func (a *Approver) Open(reason string) { a.OpenFrom(reason, "") }

// OpenFrom opens the window like Open; rv, when not empty, is the resource version of the Node
// change the kubelet reacts to, and the window's watch starts from it with no LIST.
func (a *Approver) OpenFrom(reason, rv string) {
	a.mu.Lock()
	a.win.open(a.cfg.Now(), rv)
	a.mu.Unlock()
	a.cfg.Logger.Debug("kubelet serving CSR window opened", "node", a.cfg.Node, "reason", reason, "from", rv)
	a.wake()
}

// NodeUpdated is the agent's Node informer's update: a change of the Node's addresses opens the
// window from the updated Node's resource version, and any change may let a pending CSR through
// (NodeChanged).
func (a *Approver) NodeUpdated(old, updated *corev1.Node) {
	if AddressesChanged(old, updated) {
		a.OpenFrom("node-addresses-changed", updated.ResourceVersion)
	}
	a.NodeChanged()
}

// wake tells Run to look at the window again; it never blocks.
func (a *Approver) wake() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// NodeChanged re-examines the pending CSRs of the Node that were decided on other own state: the
// addresses nodeaddr publishes, or the Node's names, may now be those the kubelet asked for (the
// kubelet files its CSR once it sees the Node's new addresses). The agent calls it from its Node
// informer's handler; a Node update that changes neither (a kubelet heartbeat) costs no request.
func (a *Approver) NodeChanged() {
	a.requeue()
}

// requeue queues the Node's pending CSRs not yet decided on the current own state.
func (a *Approver) requeue() {
	now := a.ownState()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, csr := range a.csrs {
		if a.decidedOn[csr.Name] != now {
			a.enqueue(csr)
		}
	}
}

// ownState is the agent's own state a decision used, as a comparable string.
func (a *Approver) ownState() string {
	published, node := a.cfg.Own()
	f := Facts{}
	for _, ip := range published {
		f.Published = append(f.Published, ip.Unmap())
	}
	if node != nil {
		f.DNSNames = dnsNames(node.Status.Addresses)
	}
	return f.own()
}

// own is the part of the Facts that comes from the agent's own state.
func (f Facts) own() string { return fmt.Sprint(f.Published, f.DNSNames) }

// Run runs the worker, opens the window and reads CSRs while it is open and at each backstop
// interval while a CSR may come without an address change, until ctx ends.
func (a *Approver) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		<-ctx.Done()
		a.queue.ShutDown()
	})
	wg.Go(func() {
		for a.processNext(ctx) {
		}
	})
	a.Open("start")
	if a.cfg.Kubelet != nil {
		wg.Go(func() { a.probeLoop(ctx) })
	}
	a.control(ctx, ticks(ctx, a.cfg.Backstop))
}

// processNext handles one queued CSR; false once the queue is shut down.
func (a *Approver) processNext(ctx context.Context) bool {
	name, shutdown := a.queue.Get()
	if shutdown {
		return false
	}
	defer a.queue.Done(name)
	err := a.sync(ctx, name)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err == nil || ctx.Err() != nil {
		delete(a.failures, name)
		return true
	}
	n := a.failures[name]
	a.failures[name] = n + 1
	delay := min(retryBase<<min(n, 10), retryMax)
	a.cfg.Logger.Warn("kubelet serving CSR not handled, retrying", "node", a.cfg.Node, "csr", name, "err", err, "retry_in", delay)
	time.AfterFunc(delay, func() { a.queue.Add(name) })
	return true
}

// A CSR whose handling failed (a read or the approval) is retried after retryBase, doubling up to
// retryMax: a kubelet waits for its certificate, but a refusal (RBAC, the admission policy) must not
// turn into a request loop.
const (
	retryBase = time.Second
	retryMax  = 5 * time.Minute
)

type nopObserver struct{}

func (nopObserver) OnCSRPending(string)         {}
func (nopObserver) OnCSRApproved(time.Duration) {}
