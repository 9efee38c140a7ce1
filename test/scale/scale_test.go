//go:build bench

package scale

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/agent"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/test/harness"
	"github.com/nodeaddr/nodeaddr/watcher"
)

// Failure bounds, never expected durations.
const (
	convergeBound = 10 * time.Minute
	quietBound    = 30 * time.Second
)

// Settings of every agent: those of the DaemonSet (client-go's default QPS/Burst, nodeaddr's
// default publish rate and burst).
const (
	clientQPS    = 5
	clientBurst  = 10
	publishRate  = 1
	publishBurst = 3
	// debounce is the agents' quiet period after a kernel change (the DaemonSet's is longer: here
	// the changes are single events, not bursts).
	debounce = 10 * time.Millisecond
)

// flowSchemaName is the FlowSchema and priority level of deploy/flowcontrol.yaml.
const flowSchemaName = "nodeaddr"

// target is the agents' ExternalIP target; the kernel routes everything through its one address.
var routeTarget = netip.MustParseAddr("192.0.2.1")

func TestScale500(t *testing.T) {
	n := envInt(t, "NODEADDR_SCALE_NODES", 500)
	idle := envDuration(t, "NODEADDR_SCALE_IDLE", 60*time.Second)
	if n < 1 || n > 65535 {
		t.Fatalf("NODEADDR_SCALE_NODES=%d: want 1..65535", n)
	}
	ctx := context.Background()
	r := &report{nodes: n, idle: idle, apf: os.Getenv("NODEADDR_SCALE_APF") == "on",
		flowSchema: os.Getenv("NODEADDR_SCALE_FLOWSCHEMA") == "on"}
	if r.flowSchema && !r.apf {
		t.Fatal("NODEADDR_SCALE_FLOWSCHEMA=on needs NODEADDR_SCALE_APF=on: without priority and fairness no FlowSchema applies")
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%05d", i)
	}

	var by *bystanders
	cp := harness.StartControlPlaneWith(t, func(cp *harness.ControlPlane) (err error) {
		if r.apf {
			// Priority and fairness with v1.37.2's default FlowSchemas and priority levels.
			cp.ExtraArgs = append(cp.ExtraArgs, "--enable-priority-and-fairness=true")
		}
		by, err = newBystanders(cp, names)
		return err
	})
	cp.ApplyRBAC(t)
	// The per-node admission policy the DaemonSet ships: its CEL runs on every agent write.
	if err := cp.ApplyPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	if r.flowSchema {
		// The FlowSchema and priority level the kustomize base and the chart ship, as written:
		// their subject is kube-system/nodeaddr, the ServiceAccount the fleet's tokens are for.
		if err := cp.ApplyManifest(ctx, filepath.Join(harness.RepoDir(), "deploy", "flowcontrol.yaml")); err != nil {
			t.Fatal(err)
		}
	}
	api := findAPIServer(t, cp.Port)
	if r.fleetNice = envInt(t, "NODEADDR_SCALE_FLEET_NICE", 0); r.fleetNice != 0 {
		// The experiment of whether the bystanders' latency is this machine's CPU: the fleet (and
		// the bystanders, in the same process) yield the cores to kube-apiserver and etcd, as
		// agents on their own nodes would.
		if err := reniceSelf(r.fleetNice); err != nil {
			t.Fatal(err)
		}
	}

	// Nodes as a kubelet with --cloud-provider=external registers them, and one pod-bound token each.
	setup := time.Now()
	if err := createNodes(ctx, cp.Admin, names, 16); err != nil {
		t.Fatal(err)
	}
	r.nodesSetup = time.Since(setup)
	tokenStart := time.Now()
	tokens, err := cp.AgentTokens(ctx, names, 8)
	if err != nil {
		t.Fatal(err)
	}
	r.tokensSetup = time.Since(tokenStart)
	t.Logf("%d nodes in %s, %d pods and tokens in %s", n, r.nodesSetup.Round(time.Millisecond), n,
		r.tokensSetup.Round(time.Millisecond))
	if r.flowSchema {
		// Before the fleet starts, an agent's request must land in the shipped level.
		if err := cp.WaitClassified(ctx, tokens[0], "/api/v1/nodes/"+names[0], flowSchemaName, flowSchemaName, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// One admin watch on every Node tells when each shows its address.
	tr := newTracker(n)
	runCtx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(cp.Admin, 0)
	inf := factory.Core().V1().Nodes().Informer()
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { tr.observe(o.(*corev1.Node)) },
		UpdateFunc: func(_, o any) { tr.observe(o.(*corev1.Node)) },
	})
	factory.Start(runCtx.Done())
	if !cache.WaitForCacheSync(runCtx.Done(), inf.HasSynced) {
		t.Fatal("admin node informer did not sync")
	}
	r.apiRSSBefore = api.rssMiB()

	// The bystanders alone first: their latencies without the fleet.
	by.setPhase("before the agents (30 s)")
	by.start(runCtx, t, cp, names)
	time.Sleep(30 * time.Second) // measured window: the bystanders alone for 30 s

	agents, err := newFleet(runCtx, cp.Config.Host, names, tokens, false)
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

	// (1) Start every agent with its first address: time until every Node shows it, and until every
	// uninitialized taint is gone.
	want := func(phase int) map[string]string { return phaseAddresses(names, phase) }
	tr.expect(want(1))
	cpu0 := api.cpuSeconds()
	by.setPhase("start")
	start := time.Now()
	runFleet(runCtx, t, &wg, agents, start)
	r.start = tr.wait(t, start, "first addresses")
	r.taint = tr.waitTaints(t, start)
	quiet(t, cp.AuditLog)
	r.startCPU = api.cpuSeconds() - cpu0
	r.startReqs = countRequests(t, cp, start, time.Now())
	r.startObs = sumCounters(agents)
	r.selfRSS, r.heapPerAgent, r.goroutines = selfMemory(n)
	r.apiRSSAgents = api.rssMiB()

	// (2) Mass change: a new address for every node at once.
	tr.expect(want(2))
	cpu0 = api.cpuSeconds()
	by.setPhase("mass change")
	massStart := time.Now()
	for i, a := range agents {
		a.set(externalIP(2, i), massStart)
	}
	r.mass = tr.wait(t, massStart, "mass change")
	quiet(t, cp.AuditLog)
	r.massCPU = api.cpuSeconds() - cpu0
	r.massReqs = countRequests(t, cp, massStart, time.Now())
	r.massObs = sumCounters(agents).minus(r.startObs)

	// (3) Idle. Halfway through, every agent's kernel signals a change that changes nothing, so each
	// resolves its unchanged state again, as the periodic resync does: that must cost nothing either.
	cpu0 = api.cpuSeconds()
	by.setPhase("idle")
	idleStart := time.Now()
	time.Sleep(idle / 2) // measured window: the first half of the idle phase
	for i, a := range agents {
		a.set(externalIP(2, i), time.Now())
	}
	time.Sleep(idle - idle/2) // measured window: the second half
	idleEnd := time.Now()
	r.idleCPU = api.cpuSeconds() - cpu0
	r.idleReqs = countRequests(t, cp, idleStart, idleEnd)
	r.idleActual = idleEnd.Sub(idleStart)
	r.apiRSSIdle = api.rssMiB()

	r.idleObs = sumCounters(agents).minus(r.startObs).minus(r.massObs)
	r.bystanders = by.table()
	if r.bystandersServer, err = by.serverTable(cp); err != nil {
		t.Fatal(err)
	}
	r.flows = flowPlacement(ctx, t, cp)
	r.etcdMiB = dirMiB(filepath.Join(cp.Dir, "etcd"))
	r.write(t)
}

// externalIP is node i's address in a phase: 10.(64+phase).hi.lo.
func externalIP(phase, i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(64 + phase), byte(i >> 8), byte(i)})
}

// createNodes registers Nodes as a kubelet with --cloud-provider=external does: the uninitialized
// taint, and an InternalIP plus Hostname in the status.
func createNodes(ctx context.Context, c kubernetes.Interface, names []string, workers int) error {
	return parallel(len(names), workers, func(i int) error {
		n, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: names[i]},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{harness.Uninitialized}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", names[i], err)
		}
		n.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).String()},
			{Type: corev1.NodeHostName, Address: names[i]},
		}
		if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{FieldManager: "kubelet"}); err != nil {
			return fmt.Errorf("set node %s addresses: %w", names[i], err)
		}
		return nil
	})
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// fleetAgent is one in-process nodeaddr: its own client (own transport, so its own TLS connection, as a
// separate process has), event recorder and publisher.
// agent is one nodeaddr agent as cmd/nodeaddr assembles it (agent.Agent: the Node informer, the
// resolver loop, the publisher), over a kernel of one address instead of netlink.
type fleetAgent struct {
	node   string
	agent  *agent.Agent
	kernel *oneAddressKernel
	sig    *watcher.Signal
	obs    writeCounts
	events record.EventBroadcaster
}

// set gives the agent's kernel a new address (or the same one) and signals the change, as the
// netlink watcher would, at the time at.
func (a *fleetAgent) set(ip netip.Addr, at time.Time) {
	a.kernel.set(ip)
	a.sig.Raise(at)
}

// oneAddressKernel is a host with one uplink address, the route source toward every target.
type oneAddressKernel struct {
	mu sync.Mutex
	ip netip.Addr
}

func (k *oneAddressKernel) set(ip netip.Addr) {
	k.mu.Lock()
	k.ip = ip
	k.mu.Unlock()
}

func (k *oneAddressKernel) RouteSource(netip.Addr) (netip.Addr, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ip, nil
}

func (k *oneAddressKernel) Addresses() ([]resolver.LocalAddr, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return []resolver.LocalAddr{{IP: k.ip, LinkIndex: 2, Link: "eth0", PrefixLen: 16, PreferredLft: 0xFFFFFFFF}}, nil
}

func newAgent(ctx context.Context, host, node, token string) (*fleetAgent, error) {
	return newAgentWith(ctx, host, node, token, false)
}

// newFleet builds one agent per node of names with its token, each also writing the approval
// record when approvalRecord is set (--approval-record); none runs yet.
func newFleet(ctx context.Context, host string, names, tokens []string, approvalRecord bool) ([]*fleetAgent, error) {
	agents := make([]*fleetAgent, len(names))
	for i := range agents {
		var err error
		if agents[i], err = newAgentWith(ctx, host, names[i], tokens[i], approvalRecord); err != nil {
			return nil, err
		}
	}
	return agents, nil
}

// runFleet gives every agent its phase-1 address at the time at and runs it on wg until ctx ends.
func runFleet(ctx context.Context, t *testing.T, wg *sync.WaitGroup, agents []*fleetAgent, at time.Time) {
	for i, a := range agents {
		a.set(externalIP(1, i), at)
		wg.Go(func() {
			if err := a.agent.Run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("agent %s: %v", a.node, err)
			}
		})
	}
}

// phaseAddresses is every Node's ExternalIP in a phase.
func phaseAddresses(names []string, phase int) map[string]string {
	m := make(map[string]string, len(names))
	for i, name := range names {
		m[name] = externalIP(phase, i).String()
	}
	return m
}

// newAgentWith builds node's agent; with approvalRecord it also writes the approval record on its
// Node (vocab.RecordSpec appended to its annotations, as cmd/nodeaddr does for
// --approval-record).
func newAgentWith(ctx context.Context, host, node, token string, approvalRecord bool) (*fleetAgent, error) {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cfg := &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		UserAgent:       "nodeaddr/scale",
		QPS:             clientQPS,
		Burst:           clientBurst,
		// A Dial function makes client-go build a transport for this client alone instead of sharing
		// its cached one: 500 agents are 500 connections, not 500 streams of one HTTP/2 connection.
		Dial:          dialer.DialContext,
		WrapTransport: patchesSent.wrap,
	}
	// The agent's own client (internal/kube), as cmd/nodeaddr builds it: what the fleet measures is
	// what the agent sends, including which answers client-go retries by itself.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	kc, err := kube.NewClientForConfigAndClient(cfg, kube.Scheme(), hc)
	if err != nil {
		return nil, err
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(kc.EventSink())
	a := &fleetAgent{node: node, kernel: &oneAddressKernel{}, sig: watcher.NewSignal(), obs: writeCounts{prometheus.NewRegistry()}, events: b}
	rec := b.NewRecorder(kube.Scheme(), corev1.EventSource{Component: "nodeaddr", Host: node})
	var annotations []vocab.AnnotationSpec
	if approvalRecord {
		annotations = append(annotations, vocab.RecordSpec())
	}
	ag, err := agent.New(agent.Config{
		NodeName: node, Nodes: kc,
		Publisher: publisher.Config{
			RemoveTaint: true, Annotations: annotations,
			Rate: publishRate, Burst: publishBurst, Metrics: publisher.NewMetrics(a.obs.reg), Recorder: rec,
		},
		Loop: resolver.LoopConfig{
			Kernel: a.kernel,
			Policy: resolver.Policy{Managed: []resolver.AddressType{resolver.ExternalIP},
				Targets: []resolver.Target{{Type: resolver.ExternalIP, IP: routeTarget}}},
			Debounce: debounce, MaxDelay: 4 * debounce,
		},
		Trigger: a.sig,
	})
	if err != nil {
		return nil, err
	}
	a.agent = ag
	return a, nil
}

// counters are write outcomes summed over agents.
type counters struct{ conflicts, errors, overwrites int64 }

func (c counters) minus(o counters) counters {
	return counters{c.conflicts - o.conflicts, c.errors - o.errors, c.overwrites - o.overwrites}
}

func (c counters) String() string {
	return fmt.Sprintf("%d / %d / %d", c.conflicts, c.errors, c.overwrites)
}

func sumCounters(agents []*fleetAgent) counters {
	var c counters
	for _, a := range agents {
		ac := a.obs.counters()
		c.conflicts += ac.conflicts
		c.errors += ac.errors
		c.overwrites += ac.overwrites
	}
	return c
}

// writeCounts reads an agent's write outcomes from its publisher's metrics, registered on a
// registry of the agent's own.
type writeCounts struct{ reg *prometheus.Registry }

func (w writeCounts) counters() counters {
	mfs, err := w.reg.Gather()
	if err != nil {
		panic(fmt.Sprintf("gather an agent's metrics: %v", err)) // counters only: cannot fail
	}
	var c counters
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := int64(m.GetCounter().GetValue())
			switch mf.GetName() {
			case "nodeaddr_overwrites_total":
				c.overwrites += v
			case "nodeaddr_node_writes_total":
				for _, l := range m.GetLabel() {
					switch {
					case l.GetName() != "result":
					case l.GetValue() == publisher.ResultConflict:
						c.conflicts += v
					case l.GetValue() == publisher.ResultError:
						c.errors += v
					}
				}
			}
		}
	}
	return c
}

// tracker records, from one watch on all Nodes, when each Node first shows the ExternalIP it should.
type tracker struct {
	n         int
	mu        sync.Mutex
	want      map[string]string
	at        map[string]time.Time
	done      chan struct{}
	untainted map[string]time.Time
	taintDone chan struct{}
	// converged, if set, is called (with tr.mu held) when a Node first shows what the phase wants.
	converged func(node string)
}

func newTracker(n int) *tracker {
	return &tracker{n: n, untainted: map[string]time.Time{}, taintDone: make(chan struct{})}
}

// expect starts a phase: every Node must show want[name].
func (tr *tracker) expect(want map[string]string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.want, tr.at, tr.done = want, make(map[string]time.Time, len(want)), make(chan struct{})
}

func (tr *tracker) observe(n *corev1.Node) {
	now := time.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if w, ok := tr.want[n.Name]; ok {
		if _, seen := tr.at[n.Name]; !seen && hasExternal(n, w) {
			tr.at[n.Name] = now
			if tr.converged != nil {
				tr.converged(n.Name)
			}
			if len(tr.at) == len(tr.want) {
				close(tr.done)
			}
		}
	}
	if _, seen := tr.untainted[n.Name]; !seen && !harness.HasTaint(n, cloudproviderapi.TaintExternalCloudProvider) {
		tr.untainted[n.Name] = now
		if len(tr.untainted) == tr.n {
			close(tr.taintDone)
		}
	}
}

// wait blocks until every Node converged and returns the per-node delays from start.
func (tr *tracker) wait(t *testing.T, start time.Time, what string) []time.Duration {
	t.Helper()
	tr.mu.Lock()
	done := tr.done
	tr.mu.Unlock()
	select {
	case <-done:
	case <-time.After(convergeBound):
		tr.mu.Lock()
		got := len(tr.at)
		tr.mu.Unlock()
		t.Fatalf("%s: only %d of %d nodes converged within %s", what, got, tr.n, convergeBound)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return delays(tr.at, start)
}

func (tr *tracker) waitTaints(t *testing.T, start time.Time) []time.Duration {
	t.Helper()
	select {
	case <-tr.taintDone:
	case <-time.After(convergeBound):
		t.Fatalf("uninitialized taint still on some nodes after %s", convergeBound)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return delays(tr.untainted, start)
}

func delays(at map[string]time.Time, start time.Time) []time.Duration {
	out := make([]time.Duration, 0, len(at))
	for _, ts := range at {
		out = append(out, ts.Sub(start))
	}
	return out
}

func hasExternal(n *corev1.Node, ip string) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeExternalIP && a.Address == ip {
			return true
		}
	}
	return false
}

// quiet waits until no request of the agents has reached the audit log for two seconds: their
// trailing requests (Events, sent asynchronously by the recorder) are done.
func quiet(t *testing.T, auditLog string) {
	t.Helper()
	quietFor(t, auditLog, harness.AgentUser)
}

// quietFor is quiet for the requests of any of users.
func quietFor(t *testing.T, auditLog string, users ...string) {
	t.Helper()
	f, err := os.Open(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	// The users' lines: the bystanders keep writing theirs, so the log as a whole never settles.
	markers := make([][]byte, len(users))
	longest := 0
	for i, u := range users {
		markers[i] = []byte(`"username":"` + u + `"`)
		longest = max(longest, len(markers[i]))
	}
	var carry []byte // a marker split across two reads
	since := time.Now()
	if err := harness.Poll(quietBound, 250*time.Millisecond, fmt.Sprintf("no request of %v in the audit log for 2 s", users), func() (bool, string) {
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > off {
			chunk := make([]byte, st.Size()-off)
			n, _ := f.ReadAt(chunk, off)
			off += int64(n)
			chunk = append(carry, chunk[:n]...)
			if slices.ContainsFunc(markers, func(m []byte) bool { return bytes.Contains(chunk, m) }) {
				since = time.Now()
			}
			carry = chunk[max(0, len(chunk)-longest):]
		}
		quiet := time.Since(since)
		return quiet >= 2*time.Second, fmt.Sprintf("the last one %s ago", quiet.Round(time.Millisecond))
	}); err != nil {
		t.Logf("%v; measuring anyway", err)
	}
}

// countRequests counts the agents' API requests received in [from, to), by "verb resource[/sub]",
// with the status code appended when it is not 2xx (a 429 from the API server's in-flight limit is
// a request too: client-go retries it after the Retry-After delay).
// A watch is counted when it starts (its ResponseStarted record), every other request when it
// completes.
func countRequests(t *testing.T, cp *harness.ControlPlane, from, to time.Time) map[string]int {
	t.Helper()
	return countRequestsBy(t, cp, harness.AgentUser, from, to)
}

// countRequestsBy is countRequests for user's requests.
func countRequestsBy(t *testing.T, cp *harness.ControlPlane, user string, from, to time.Time) map[string]int {
	t.Helper()
	evs, err := cp.AuditSince(user, from)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range evs {
		if !e.RequestReceived.Before(to) {
			continue
		}
		counted := e.Stage == "ResponseComplete" || e.Stage == "Panic"
		if e.Verb == "watch" {
			counted = e.Stage == "ResponseStarted" || (e.Stage == "ResponseComplete" && e.ResponseStatus != nil && e.ResponseStatus.Code != 200)
		}
		if !counted {
			continue
		}
		key := e.Verb
		if e.ObjectRef != nil {
			key += " " + e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				key += "/" + e.ObjectRef.Subresource
			}
		}
		if e.ResponseStatus != nil && (e.ResponseStatus.Code < 200 || e.ResponseStatus.Code > 299) {
			key += fmt.Sprintf(" (%d)", e.ResponseStatus.Code)
		}
		out[key]++
	}
	return out
}

// selfMemory reports this process's RSS, heap in use per agent and goroutines.
func selfMemory(n int) (rssMiB float64, heapPerAgentKiB float64, goroutines int) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return procRSSMiB("self"), float64(ms.HeapInuse) / 1024 / float64(n), runtime.NumGoroutine()
}

func envInt(t *testing.T, key string, def int) int {
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, s, err)
	}
	return v
}

func envDuration(t *testing.T, key string, def time.Duration) time.Duration {
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, s, err)
	}
	return v
}
