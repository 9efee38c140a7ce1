//go:build bench

package scale

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// kubeletDelay is how long after its Node shows the new address a kubelet files its serving CSR
// (0.8–1 s on the real node, REFERENCE.md "Renumbering day").
const kubeletDelay = time.Second

// TestScaleCSR: N agents with --approval-record (each writes, on its own Node, the addresses it
// published) and one central approver in this process (csrapproval.Controller as `nodeaddr approver
// --leader-elect=false` runs it: approver_test.go). The benchmark plays the kubelets: each files a
// kubelet-serving CSR for its Node's new ExternalIP as its node identity (the administrator
// impersonating system:node:NAME in system:nodes, as test/csr does) a second after its Node shows the
// address: at the start (the serving certificate's bootstrap), then after a mass renumbering of every
// node at once. Per phase it reports the CSRs approved and their latency from creation, the
// approver's API requests, CPU (its goroutines' share of this process's CPU profile) and the CSR and
// Node objects its informers received, the agents' requests and the kube-apiserver's CPU; then the
// idle cost and the approver's heap.
//
//	cd test && go test -tags bench ./scale/ -run TestScaleCSR -v -count=1 -timeout 60m
func TestScaleCSR(t *testing.T) {
	n := envInt(t, "NODEADDR_SCALE_NODES", 500)
	idle := envDuration(t, "NODEADDR_SCALE_IDLE", 60*time.Second)
	if n < 1 || n > 65535 {
		t.Fatalf("NODEADDR_SCALE_NODES=%d: want 1..65535", n)
	}
	ctx := context.Background()
	r := &csrReport{nodes: n, apf: os.Getenv("NODEADDR_SCALE_APF") == "on"}
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
	self := apiProcess{pid: "self"}
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

	// The approver first (it runs before the fleet in a cluster too), then the fleet.
	apr := startApprover(runCtx, t, cp)
	r.cidrObjects = apr.cidrObjects
	agents, err := newFleet(runCtx, cp.Config.Host, names, tokens, true)
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
	phase := func(p int) {
		want := phaseAddresses(names, p)
		tr.expect(want)
		ap.expect(names, p)
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.converged = func(node string) {
			time.AfterFunc(kubeletDelay, func() {
				sent, err := kubelets.fileRetrying(runCtx, node, p, netip.MustParseAddr(want[node]))
				if err != nil {
					if runCtx.Err() == nil {
						t.Errorf("kubelet of %s: %v", node, err)
					}
					return
				}
				ap.filed(csrName(node, p), sent)
			})
		}
	}
	// measure starts measuring a phase; the function it returns ends the measurement into ph.
	measure := func() (time.Time, func(ph *csrPhase)) {
		v0 := apr.verdicts(t)
		apr.recv.take()
		api0, self0 := api.cpuSeconds(), self.cpuSeconds()
		prof := startCPUProfile()
		start := time.Now()
		return start, func(ph *csrPhase) {
			end := time.Now()
			ph.cpu = prof.stop()
			ph.apiCPU, ph.selfCPU = api.cpuSeconds()-api0, self.cpuSeconds()-self0
			ph.span = end.Sub(start)
			ph.received = apr.recv.take()
			ph.verdicts = minus(apr.verdicts(t), v0)
			ph.approverReqs = countRequestsBy(t, cp, approverUser, start, end)
			ph.agentReqs = countRequests(t, cp, start, end)
		}
	}

	// (1) Start: every agent publishes its first address and record, every kubelet bootstraps its
	// serving certificate.
	phase(1)
	start, end := measure()
	runFleet(runCtx, t, &wg, agents, start)
	r.start.nodes = tr.wait(t, start, "first addresses")
	r.start.approvedAt, r.start.latency = ap.wait(t, start, "bootstrap CSRs")
	quietFor(t, cp.AuditLog, harness.AgentUser, approverUser)
	end(&r.start)

	// (2) Mass renumbering: a new address for every node at once.
	phase(2)
	start, end = measure()
	for i, a := range agents {
		a.set(externalIP(2, i), start)
	}
	r.mass.nodes = tr.wait(t, start, "mass change")
	r.mass.approvedAt, r.mass.latency = ap.wait(t, start, "renumbering CSRs")
	quietFor(t, cp.AuditLog, harness.AgentUser, approverUser)
	end(&r.mass)

	// (3) Idle: nothing changes.
	_, end = measure()
	time.Sleep(idle) // measured window: the idle phase
	end(&r.idle)

	r.selfRSS, r.heapPerAgent, r.goroutines = selfMemory(n)
	r.approverHeap = apr.stop(t)
	r.refiled = kubelets.refiled.Load()
	r.write(t)
}

// minus is a − b, key by key.
func minus(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// kubelets file kubelet-serving CSRs as their nodes: one client per node, the administrator
// impersonating system:node:NAME in system:nodes (what the Node authorizer sees for a kubelet's
// client certificate), on the administrator's one connection. No kube-controller-manager signs
// them: what is measured ends at the approval.
type kubelets struct {
	clients map[string]kubernetes.Interface
	key     *ecdsa.PrivateKey

	refiled atomic.Int64 // CSR creations the server refused and the kubelet retried
}

func newKubelets(admin *rest.Config, names []string) (*kubelets, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	k := &kubelets{clients: make(map[string]kubernetes.Interface, len(names)), key: key}
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
// (one key per node in reality; one shared key here: the approver does not look at it). It returns
// when the request was sent.
func (k *kubelets) file(ctx context.Context, node string, p int, ip netip.Addr) (time.Time, error) {
	csr, err := harness.ServingCSR{Node: node, IPs: []string{ip.String()}, DNS: []string{node}, Key: k.key}.Object(csrName(node, p))
	if err != nil {
		return time.Time{}, err
	}
	sent := time.Now()
	_, err = k.clients[node].CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
	return sent, err
}

// fileRetrying files the CSR as the kubelet's certificate manager does when the server refuses it
// (client-go util/certificate: 2 s doubling for 5 attempts, ±10%, then every 32 s): from 2 000
// agents on, a mass renumbering's CSRs meet 429s that client-go's own retries do not outlast. It
// returns when the creating request was sent: on an AlreadyExists, an earlier attempt got through,
// taken to be the one before.
func (k *kubelets) fileRetrying(ctx context.Context, node string, p int, ip netip.Addr) (time.Time, error) {
	delay := 2 * time.Second
	var previous time.Time
	for attempt := 0; ; attempt++ {
		sent, err := k.file(ctx, node, p, ip)
		switch {
		case err == nil:
			return sent, nil
		case apierrors.IsAlreadyExists(err) && !previous.IsZero():
			return previous, nil
		case apierrors.IsAlreadyExists(err):
			return sent, nil
		}
		if !apierrors.IsTooManyRequests(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsTimeout(err) &&
			!apierrors.IsServiceUnavailable(err) && !apierrors.IsInternalError(err) {
			return time.Time{}, err
		}
		previous = sent
		k.refiled.Add(1)
		if attempt >= 5 {
			delay = 32 * time.Second
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(time.Duration(float64(delay) * (1 + 0.1*mrand.Float64()))):
		}
		delay *= 2
	}
}

func csrName(node string, p int) string { return fmt.Sprintf("%s-serving-%d", node, p) }

// approvals records, from one admin watch on kubelet-serving CSRs, when each CSR of the phase was
// sent by its kubelet and when it was first seen approved.
type approvals struct {
	mu       sync.Mutex
	node     map[string]string // CSR name → node, for this phase
	sentAt   map[string]time.Time
	approved map[string]time.Time
	done     chan struct{}
}

func newApprovals() *approvals { return &approvals{} }

func (ap *approvals) expect(names []string, p int) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ap.node = make(map[string]string, len(names))
	for _, n := range names {
		ap.node[csrName(n, p)] = n
	}
	ap.sentAt, ap.approved, ap.done = map[string]time.Time{}, map[string]time.Time{}, make(chan struct{})
}

// filed records that the CSR called name was created by a request sent at sent.
func (ap *approvals) filed(name string, sent time.Time) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	if _, ours := ap.node[name]; ours {
		ap.sentAt[name] = sent
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
	if len(ap.approved) == len(ap.node) {
		close(ap.done)
	}
}

// wait blocks until every CSR of the phase is approved; it returns the delays from start and the
// latencies from each CSR's creation (its kubelet's request).
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
	// A kubelet may see its approval before the answer to its create: wait for the last answers.
	// Best effort: the latencies below leave out (and log) the CSRs still without an answer.
	_ = harness.Poll(10*time.Second, 50*time.Millisecond, "every CSR's creation answered", func() (bool, string) {
		ap.mu.Lock()
		defer ap.mu.Unlock()
		return len(ap.sentAt) == len(ap.node), fmt.Sprintf("%d of %d", len(ap.sentAt), len(ap.node))
	})
	ap.mu.Lock()
	defer ap.mu.Unlock()
	for name, at := range ap.approved {
		fromStart = append(fromStart, at.Sub(start))
		if f, ok := ap.sentAt[name]; ok {
			latency = append(latency, at.Sub(f))
		}
	}
	if len(latency) < len(ap.approved) {
		t.Logf("%s: %d of %d CSRs without their creation time (latency left out)", what, len(ap.approved)-len(latency), len(ap.approved))
	}
	return fromStart, latency
}
