package soak

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The soak's topology: the node has two uplinks to one router namespace. eth0 (192.0.2.0/24) carries
// the default route of metric 100; eth1 (198.51.100.0/24) a default route of metric 200 and the
// route to the internal network 10.200.0.0/16 (metric 50), which falls back to eth0's default.
const (
	internalTarget = "10.200.0.1"
	externalTarget = "8.8.8.8" // only looked up in the node's routing table; no packet is sent
	nodeName       = "soak"
	grace          = 5 * time.Second        // the agent's --removal-grace (its default)
	linkHold       = 100 * time.Millisecond // the agent's --link-debounce (its default)
	kubeletIP      = "192.0.2.250"          // the address the kubelet-like reverter writes
)

type uplink struct {
	dev, prefix, gw string
	metric          int
}

var uplinks = []uplink{
	{dev: "eth0", prefix: "192.0.2.", gw: "192.0.2.1", metric: 100},
	{dev: "eth1", prefix: "198.51.100.", gw: "198.51.100.1", metric: 200},
}

// agentArgs are the agent's flags: both types in both families (TestSoak's node is dual-stack, with
// the SLAAC uplink of ra6.go and the DHCPv6 uplink of dhcp6.go; without them the IPv6 targets have
// no route), and short overwrite back-offs so that a reverter's burst is followed by convergence
// within the check's bound.
var agentArgs = []string{
	"--node-name=" + nodeName,
	"--internal-ip-target=" + internalTarget + "," + target6,
	"--external-ip-target=" + externalTarget + "," + externalTarget6,
	// The DHCPv6 uplink is for the ExternalIP: when eth3 has no usable address the kernel's source
	// toward target6 is eth4's lease, which must not become the InternalIP.
	"--internal-ip-exclude-interfaces=" + dhcp6Dev,
	"--netlink-receive-buffer=65536",
	"--overwrite-backoff=2s",
	"--overwrite-backoff-max=8s",
}

// auditPolicy records the agent's Node writes with request and response bodies (invariants 2 and
// 4 read them) and everyone else's Node writes with their request.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: RequestResponse
  users: ["` + harness.AgentUser + `"]
  verbs: ["patch", "update", "create"]
  resources: [{group: "", resources: ["nodes", "nodes/status"]}]
- level: Metadata
`

// world is the soak's system under test and its instruments.
type world struct {
	t       *testing.T
	cp      *harness.ControlPlane
	admin   kubernetes.Interface // survives API server restarts (same port and token)
	ns, rtr *harness.Netns
	relay   *relay
	kc      string
	token   string
	rec     *recorder

	mu     sync.Mutex
	agent  *harness.Agent
	killed map[*harness.Agent]bool // processes stopped on purpose (a kill, the test's end)
}

func newWorld(t *testing.T, rec *recorder) *world {
	t.Helper()
	harness.RequireE2E(t)
	t.Setenv("NODEADDR_E2E_QUIET", "1")
	bins := harness.MustBuild(t)
	cp, err := harness.NewControlPlane(bins, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cp.Dir, "audit-policy.yaml"), []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	if err := cp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	cp.ApplyRBAC(t)
	w := &world{t: t, cp: cp, rec: rec, killed: map[*harness.Agent]bool{}}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Timeout = 10 * time.Second
	w.admin = kubernetes.NewForConfigOrDie(cfg)
	w.ns = harness.NewNetns(t, "soak")
	w.rtr = harness.NewNetns(t, "srtr")
	w.ns.Sysctl("net.ipv4.conf.all.promote_secondaries", "1")
	w.ns.Sysctl("net.ipv4.conf.default.promote_secondaries", "1")
	for _, u := range uplinks {
		harness.AddUplink(w.ns, w.rtr, u.dev, u.prefix+"10/24", u.gw, u.metric)
		w.rtr.IP("addr", "add", u.gw+"/24", "dev", "r-"+u.dev)
	}
	w.ns.Sysctl("net.ipv4.conf.eth0.ignore_routes_with_linkdown", "1")
	w.ns.IP("route", "add", "10.200.0.0/16", "via", uplinks[1].gw, "dev", "eth1", "metric", "50")
	w.relay = newRelay(t, w.ns, cp.Port)
	// The agent's token lives one hour, as a projected ServiceAccount token; the kubelet renews the
	// file at 80% of that, and so does the soak (a run past one hour got 401s until this did).
	dir := harness.AgentDir(t)
	tokenFile := filepath.Join(dir, "token")
	if err := w.renewToken(tokenFile); err != nil {
		t.Fatal(err)
	}
	w.kc = harness.KubeconfigTokenFile(t, dir, fmt.Sprintf("https://127.0.0.1:%d", cp.Port), tokenFile)
	renewCtx, stopRenewing := context.WithCancel(context.Background())
	t.Cleanup(stopRenewing)
	go w.renewTokens(renewCtx, tokenFile, 48*time.Minute)
	if err := w.createNode(); err != nil {
		t.Fatal(err)
	}
	return w
}

// createNode registers the Node as a kubelet with --cloud-provider=external does: the uninitialized
// taint and only a Hostname address.
func (w *world) createNode() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes := w.admin.CoreV1().Nodes()
	_, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{harness.Uninitialized}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The agent may write the addresses between the create and this update: read, add the
	// Hostname entry, and update with the read resourceVersion until no conflict.
	for {
		n, err := nodes.Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeHostName }) {
			return nil
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: nodeName})
		if _, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{FieldManager: "kubelet"}); !apierrors.IsConflict(err) {
			return err
		}
	}
}

// startAgent starts the agent and watches for an exit nobody asked for (invariant 7).
func (w *world) startAgent() {
	a := harness.StartAgent(w.t, w.ns, harness.AgentOptions{Args: agentArgs, Kubeconfig: w.kc})
	// Cleanups run last-in first-out: this one, before StartAgent's stops the agent.
	w.t.Cleanup(func() { w.intend(a) })
	w.mu.Lock()
	w.agent = a
	w.mu.Unlock()
	w.rec.event("agent", "started pid %d", a.Pid())
	go func() {
		<-a.Done()
		w.mu.Lock()
		intended := w.killed[a]
		w.mu.Unlock()
		if !intended {
			w.rec.violate(7, "the agent (pid %d) exited unasked (%s); last log lines:\n%s", a.Pid(), a.ExitStatus(), tail(a.Logs(), 30))
		}
	}()
}

func (w *world) intend(a *harness.Agent) {
	w.mu.Lock()
	w.killed[a] = true
	w.mu.Unlock()
}

func (w *world) currentAgent() *harness.Agent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.agent
}

// killAgent SIGKILLs the agent and starts a new one after pause.
func (w *world) killAgent(pause time.Duration) {
	a := w.currentAgent()
	w.intend(a)
	a.Signal(syscall.SIGKILL)
	<-a.Done()
	w.rec.event("agent", "pid %d killed (SIGKILL), restart in %s", a.Pid(), pause)
	time.Sleep(pause) // fault window: no agent until the restart
	w.startAgent()
}

// relay forwards connections from 127.0.0.1:port inside the node's namespace to the API server on
// the host's loopback. While partitioned, bytes stop flowing both ways and new connections hang,
// as when a firewall drops the packets.
type relay struct {
	mu   sync.Mutex
	open chan struct{} // closed while traffic flows
}

func newRelay(t *testing.T, ns *harness.Netns, port int) *relay {
	t.Helper()
	l, err := ns.Listen(fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{open: make(chan struct{})}
	close(r.open)
	t.Cleanup(func() { l.Close() })
	target := fmt.Sprintf("127.0.0.1:%d", port)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go r.serve(c, target)
		}
	}()
	return r
}

func (r *relay) gate() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open
}

// partition stops the traffic until heal.
func (r *relay) partition() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.open:
		r.open = make(chan struct{})
	default:
	}
}

func (r *relay) heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.open:
	default:
		close(r.open)
	}
}

func (r *relay) serve(c net.Conn, target string) {
	defer c.Close()
	<-r.gate()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { r.copy(up, c); done <- struct{}{} }()
	go func() { r.copy(c, up); done <- struct{}{} }()
	<-done
}

// copy forwards src to dst, holding each chunk while the relay is partitioned.
func (r *relay) copy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-r.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// renewToken requests a new agent token and writes it to path (atomically: the agent may read it
// at any time).
func (w *world) renewToken(path string) error {
	tokens, err := w.cp.AgentTokens(context.Background(), []string{nodeName}, 1)
	if err != nil {
		return fmt.Errorf("agent token: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tokens[0]), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	w.mu.Lock()
	w.token = tokens[0]
	w.mu.Unlock()
	return nil
}

// renewTokens renews the token every period until ctx ends; a failed renewal is retried a minute
// later (the token still has a fifth of its life).
func (w *world) renewTokens(ctx context.Context, path string, period time.Duration) {
	next := period
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
		next = period
		if err := w.renewToken(path); err != nil && ctx.Err() == nil {
			fmt.Printf("soak: renewing the agent's token: %v (again in 1 minute)\n", err)
			next = time.Minute
		}
	}
}
