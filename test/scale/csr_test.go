//go:build bench

package scale

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// kubeletDelay is how long after its Node shows the new address a kubelet files its serving CSR
// (0.8–1 s on the real node, REFERENCE.md "Renumbering day").
const kubeletDelay = time.Second

// csrBackstop is the agents' backstop LIST interval (the approver's default).
const csrBackstop = csrapproval.DefaultBackstop

// trailing is how long a phase is measured after its last approval: the agents' Events are sent
// asynchronously. (Not "until the audit log is quiet": the backstop LISTs, one per agent per
// interval at random times, keep it growing.)
const trailing = 3 * time.Second

// TestScaleCSR: N agents with --approve-kubelet-serving-csr; the benchmark plays the kubelets, each
// filing a kubelet-serving CSR for its Node's new ExternalIP as its node identity (the administrator
// impersonating system:node:NAME in system:nodes, as test/csr does) a second after its Node shows
// the address: at the start (the serving certificate's bootstrap), then after a mass renumbering.
// It reports the time until every CSR is approved, the agents' API requests, the kube-apiserver's
// CPU, the CSR objects delivered to the agents (the fan-out) and the idle cost.
//
//	cd test && go test -tags bench ./scale/ -run TestScaleCSR -v -count=1 -timeout 60m
func TestScaleCSR(t *testing.T) {
	n := envInt(t, "NODEADDR_SCALE_NODES", 500)
	idle := envDuration(t, "NODEADDR_SCALE_IDLE", 3*time.Minute)
	ctx := context.Background()
	r := &csrReport{nodes: n, idle: idle}

	r.apf = os.Getenv("NODEADDR_SCALE_APF") == "on"
	cp := harness.StartControlPlaneWith(t, func(cp *harness.ControlPlane) error {
		if r.apf { // priority and fairness with v1.37.2's defaults, as in a real cluster
			cp.ExtraArgs = append(cp.ExtraArgs, "--enable-priority-and-fairness=true")
		}
		return nil
	})
	cp.ApplyRBAC(t)
	if err := cp.ApplyPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	component := filepath.Join(harness.RepoDir(), "deploy", "components", "kubelet-serving-csr")
	for _, f := range []string{"rbac.yaml", "policy.yaml"} {
		if err := cp.ApplyManifest(ctx, filepath.Join(component, f)); err != nil {
			t.Fatal(err)
		}
	}
	api := findAPIServer(t, cp.Port)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%05d", i)
	}
	if err := createNodes(ctx, cp.Admin, names, 16); err != nil {
		t.Fatal(err)
	}
	tokens, err := cp.AgentTokens(ctx, names, 8)
	if err != nil {
		t.Fatal(err)
	}
	kubelets, err := newKubelets(cp.Config, names)
	if err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	tr := newTracker(n)
	ap := newApprovals()
	factory := informers.NewSharedInformerFactory(cp.Admin, 0)
	csrFactory := informers.NewSharedInformerFactoryWithOptions(cp.Admin, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = csrapproval.SignerFieldSelector
	}))
	nodeInf, csrInf := factory.Core().V1().Nodes().Informer(), csrFactory.Certificates().V1().CertificateSigningRequests().Informer()
	nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { tr.observe(o.(*corev1.Node)) },
		UpdateFunc: func(_, o any) { tr.observe(o.(*corev1.Node)) },
	})
	csrInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { ap.observe(o.(*certv1.CertificateSigningRequest)) },
		UpdateFunc: func(_, o any) { ap.observe(o.(*certv1.CertificateSigningRequest)) },
	})
	factory.Start(runCtx.Done())
	csrFactory.Start(runCtx.Done())
	if !cache.WaitForCacheSync(runCtx.Done(), nodeInf.HasSynced, csrInf.HasSynced) {
		t.Fatal("admin informers did not sync")
	}

	fan := &fanout{}
	ap.onApproved = kubelets.issue
	approval := func(cs kubernetes.Interface, rec record.EventRecorder) *csrapproval.Config {
		c := fan.approval(cs, rec)
		if kubeletProbe {
			c.Kubelet = kubelets.serving
		}
		return c
	}
	agents, err := newFleet(runCtx, cp.Config.Host, names, tokens, approval)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, a := range agents {
			a.events.Shutdown()
		}
	})

	// The kubelets: each files its CSR for the phase's address a second after its Node shows it.
	phase := func(p int) map[string]string {
		want := phaseAddresses(names, p)
		tr.expect(want)
		ap.expect(names, p)
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.converged = func(node string) {
			time.AfterFunc(kubeletDelay, func() {
				if err := kubelets.fileRetrying(runCtx, node, p, netip.MustParseAddr(want[node])); err != nil && runCtx.Err() == nil {
					t.Errorf("kubelet of %s: %v", node, err)
				}
				ap.filed(node)
			})
		}
		return want
	}

	// (1) Start: every agent publishes its first address, every kubelet bootstraps its certificate.
	phase(1)
	cpu0 := api.cpuSeconds()
	start := time.Now()
	runFleet(runCtx, t, &wg, agents, start)
	r.start = tr.wait(t, start, "first addresses")
	r.startApproved, r.startLatency = ap.wait(t, start, "bootstrap CSRs")
	time.Sleep(trailing)
	r.startCPU = api.cpuSeconds() - cpu0
	r.startSpan = time.Since(start)
	r.startReqs = countRequests(t, cp, start, time.Now())
	r.startFan = fan.take()
	// Every window settles 5 s after its latest opening once its CSR is approved.
	time.Sleep(6 * time.Second)

	// (2) Mass renumbering: a new address for every node at once.
	phase(2)
	cpu0 = api.cpuSeconds()
	massStart := time.Now()
	for i, a := range agents {
		a.set(externalIP(2, i), massStart)
	}
	r.mass = tr.wait(t, massStart, "mass change")
	r.massApproved, r.massLatency = ap.wait(t, massStart, "renumbering CSRs")
	time.Sleep(trailing)
	r.massCPU = api.cpuSeconds() - cpu0
	r.massSpan = time.Since(massStart)
	r.massReqs = countRequests(t, cp, massStart, time.Now())
	r.massFan = fan.take()
	time.Sleep(6 * time.Second)

	// (3) Idle: every agent's window is closed; each LISTs once per backstop interval, at a random
	// phase.
	fan.take()
	cpu0 = api.cpuSeconds()
	idleStart := time.Now()
	time.Sleep(idle)
	idleEnd := time.Now()
	r.idleCPU = api.cpuSeconds() - cpu0
	r.idleReqs = countRequests(t, cp, idleStart, idleEnd)
	r.idleActual = idleEnd.Sub(idleStart)
	r.idleFan = fan.take()
	r.selfRSS, r.heapPerAgent, r.goroutines = selfMemory(n)
	r.refiled = kubelets.refiled.Load()
	r.write(t)
}

// kubeletProbe: the agents read their kubelet's serving certificate (csrapproval.Config.Kubelet),
// as the agent does with TLSProbe; NODEADDR_SCALE_CSR_PROBE=off measures the approver without it
// (a backstop LIST every interval).
var kubeletProbe = os.Getenv("NODEADDR_SCALE_CSR_PROBE") != "off"

// kubelets file kubelet-serving CSRs as their nodes: one client per node, the administrator
// impersonating system:node:NAME in system:nodes (what the Node authorizer sees for a kubelet's
// client certificate), on the administrator's one connection. Each serves, once its CSR is
// approved, a certificate for the addresses it asked for: with no kube-controller-manager to sign,
// the benchmark makes it (the agent's probe reads the certificate, never verifies it).
type kubelets struct {
	clients map[string]kubernetes.Interface
	key     *ecdsa.PrivateKey

	mu     sync.Mutex
	asked  map[string]netip.Addr        // CSR name → the IP it asks for
	served map[string]*x509.Certificate // node → its serving certificate

	refiled atomic.Int64 // CSR creations the server refused and the kubelet retried
}

// issue makes node's serving certificate for the CSR called name (approved).
func (k *kubelets) issue(name, node string) {
	k.mu.Lock()
	ip, ok := k.asked[name]
	k.mu.Unlock()
	if !ok {
		return
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "system:node:" + node},
		NotBefore: now, NotAfter: now.Add(365 * 24 * time.Hour), IPAddresses: []net.IP{ip.AsSlice()}, DNSNames: []string{node}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.key.PublicKey, k.key)
	if err != nil {
		panic(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	k.mu.Lock()
	k.served[node] = cert
	k.mu.Unlock()
}

// serving is an agent's csrapproval.KubeletCert: what its Node's kubelet serves.
func (k *kubelets) serving(_ context.Context, node *corev1.Node, _ []netip.Addr) (*x509.Certificate, error) {
	if node == nil {
		return nil, errors.New("node not known yet")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.served[node.Name]; c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate yet (bootstrap)")
}

func newKubelets(admin *rest.Config, names []string) (*kubelets, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	k := &kubelets{clients: make(map[string]kubernetes.Interface, len(names)), key: key,
		asked: map[string]netip.Addr{}, served: map[string]*x509.Certificate{}}
	for _, name := range names {
		cfg := rest.CopyConfig(admin)
		cfg.QPS, cfg.Burst = 50, 100
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + name, Groups: []string{"system:nodes", "system:authenticated"}}
		if k.clients[name], err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// file files node's serving CSR of phase p for its address ip and its name, as the kubelet does
// (one key per node in reality; one shared key here: the approver does not look at it).
func (k *kubelets) file(ctx context.Context, node string, p int, ip netip.Addr) error {
	csr, err := harness.ServingCSR{Node: node, IPs: []string{ip.String()}, DNS: []string{node}, Key: k.key}.Object(csrName(node, p))
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.asked[csr.Name] = ip
	k.mu.Unlock()
	_, err = k.clients[node].CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
	return err
}

// fileRetrying files the CSR as the kubelet's certificate manager does when the server refuses it
// (client-go util/certificate: 2 s doubling for 5 attempts, ±10%, then every 32 s): from 2 000
// agents on, a mass renumbering's CSRs meet 429s that client-go's own retries do not outlast.
// An AlreadyExists means an earlier attempt got through.
func (k *kubelets) fileRetrying(ctx context.Context, node string, p int, ip netip.Addr) error {
	delay := 2 * time.Second
	for attempt := 0; ; attempt++ {
		err := k.file(ctx, node, p, ip)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if !apierrors.IsTooManyRequests(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsTimeout(err) &&
			!apierrors.IsServiceUnavailable(err) && !apierrors.IsInternalError(err) {
			return err
		}
		k.refiled.Add(1)
		if attempt >= 5 {
			delay = 32 * time.Second
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(float64(delay) * (1 + 0.1*mrand.Float64()))):
		}
		delay *= 2
	}
}

func csrName(node string, p int) string { return fmt.Sprintf("%s-serving-%d", node, p) }

// approvals records, from one admin watch on kubelet-serving CSRs, when each CSR of the phase was
// filed and when it was first seen approved.
type approvals struct {
	mu       sync.Mutex
	node     map[string]string // CSR name → node, for this phase
	filedAt  map[string]time.Time
	approved map[string]time.Time
	done     chan struct{}
	// onApproved is called once per approved CSR of the phase (the kubelet then serves it).
	onApproved func(name, node string)
}

func newApprovals() *approvals { return &approvals{} }

func (ap *approvals) expect(names []string, p int) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ap.node = make(map[string]string, len(names))
	for _, n := range names {
		ap.node[csrName(n, p)] = n
	}
	ap.filedAt, ap.approved, ap.done = map[string]time.Time{}, map[string]time.Time{}, make(chan struct{})
}

func (ap *approvals) filed(node string) {
	now := time.Now()
	ap.mu.Lock()
	defer ap.mu.Unlock()
	for name, n := range ap.node {
		if n == node {
			ap.filedAt[name] = now
		}
	}
}

func (ap *approvals) observe(c *certv1.CertificateSigningRequest) {
	now := time.Now()
	ap.mu.Lock()
	defer ap.mu.Unlock()
	if _, ours := ap.node[c.Name]; !ours {
		return
	}
	if _, seen := ap.approved[c.Name]; seen || !slices.ContainsFunc(c.Status.Conditions, func(x certv1.CertificateSigningRequestCondition) bool {
		return x.Type == certv1.CertificateApproved
	}) {
		return
	}
	ap.approved[c.Name] = now
	if ap.onApproved != nil {
		ap.onApproved(c.Name, ap.node[c.Name])
	}
	if len(ap.approved) == len(ap.node) {
		close(ap.done)
	}
}

// wait blocks until every CSR of the phase is approved; it returns the delays from start and the
// latencies from each filing.
func (ap *approvals) wait(t *testing.T, start time.Time, what string) (fromStart, latency []time.Duration) {
	t.Helper()
	ap.mu.Lock()
	done := ap.done
	ap.mu.Unlock()
	select {
	case <-done:
	case <-time.After(convergeBound):
		ap.mu.Lock()
		got := len(ap.approved)
		ap.mu.Unlock()
		t.Fatalf("%s: only %d of %d approved within %s", what, got, len(ap.node), convergeBound)
	}
	ap.mu.Lock()
	defer ap.mu.Unlock()
	for name, at := range ap.approved {
		fromStart = append(fromStart, at.Sub(start))
		if f, ok := ap.filedAt[name]; ok {
			latency = append(latency, at.Sub(f))
		}
	}
	return fromStart, latency
}

// fanout counts what the agents' approvers receive: kubelet-serving CSRs in LIST responses, and
// watch events (bookmarks aside). Each agent keeps only its own Node's; the rest is the fan-out.
type fanout struct{ listed, events, watches, lists atomic.Int64 }

type fanoutCounts struct{ listed, events, watches, lists int64 }

func (f *fanout) take() fanoutCounts {
	return fanoutCounts{f.listed.Swap(0), f.events.Swap(0), f.watches.Swap(0), f.lists.Swap(0)}
}

// approval is the agents' approvalFor: the typed clients, wrapped to count.
func (f *fanout) approval(cs kubernetes.Interface, rec record.EventRecorder) *csrapproval.Config {
	return &csrapproval.Config{
		CSRs:     countingCSRs{csrapprovalClient: cs.CertificatesV1().CertificateSigningRequests(), f: f},
		Cluster:  clusterReader{cs},
		Recorder: rec,
	}
}

type countingCSRs struct {
	csrapprovalClient
	f *fanout
}

// csrapprovalClient is the typed client's subset the approver uses.
type csrapprovalClient = csrapproval.CSRClient

func (c countingCSRs) List(ctx context.Context, o metav1.ListOptions) (*certv1.CertificateSigningRequestList, error) {
	l, err := c.csrapprovalClient.List(ctx, o)
	c.f.lists.Add(1)
	if err == nil {
		c.f.listed.Add(int64(len(l.Items)))
	}
	return l, err
}

func (c countingCSRs) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := c.csrapprovalClient.Watch(ctx, o)
	if err != nil {
		return nil, err
	}
	c.f.watches.Add(1)
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if e.Type != watch.Bookmark {
			c.f.events.Add(1)
		}
		return e, true
	}), nil
}

// clusterReader is csrapproval.ClusterReader on a typed clientset.
type clusterReader struct{ cs kubernetes.Interface }

func (c clusterReader) ListNodes(ctx context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	return c.cs.CoreV1().Nodes().List(ctx, o)
}

func (c clusterReader) ListEndpointSlices(ctx context.Context, ns string, o metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	return c.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, o)
}
