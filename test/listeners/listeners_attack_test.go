package listeners

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// listenerSite is the DaemonSet's agent in a node namespace (192.0.2.10), a hostile second host on
// its network (router, 192.0.2.1) and Prometheus' host behind that router (198.51.100.2), so that
// the two clients have different source addresses, as they would in a cluster.
type listenerSite struct {
	cp                     *harness.ControlPlane
	a                      *harness.Agent
	node, router, prom     *harness.Netns
	metricsAddr, probeAddr string
}

func startListenerSite(t *testing.T) *listenerSite {
	t.Helper()
	ds := harness.ShippedDaemonSet(t)
	c := ds.Spec.Template.Spec.Containers[0]
	const node = "worker-1"
	s := &listenerSite{cp: harness.StartControlPlane(t)}
	harness.ApplyRBACAndPolicy(t, s.cp)
	s.cp.CreateNode(t, harness.NodeSpec{Name: node, Taints: []corev1.Taint{harness.Uninitialized},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node}}})
	cm, err := s.cp.Admin.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "nodeaddr", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.node, s.router, s.prom = harness.NewNetns(t, "ds"), harness.NewNetns(t, "rtr"), harness.NewNetns(t, "prom")
	s.node.Link("eth0", s.router, "r-eth0")
	s.prom.Link("eth0", s.router, "r-prom")
	s.node.IP("addr", "add", "192.0.2.10/24", "dev", "eth0")
	s.node.IP("route", "add", "default", "via", "192.0.2.1", "dev", "eth0")
	s.router.IP("addr", "add", "192.0.2.1/24", "dev", "r-eth0")
	s.router.IP("addr", "add", "198.51.100.1/24", "dev", "r-prom")
	s.router.Sysctl("net.ipv4.ip_forward", "1")
	s.prom.IP("addr", "add", "198.51.100.2/24", "dev", "eth0")
	s.prom.IP("route", "add", "default", "via", "198.51.100.1", "dev", "eth0")

	env, args := harness.PodEnv(t, c, node, map[string]map[string]string{cm.Name: cm.Data})
	s.a = harness.StartAgent(t, s.node, harness.AgentOptions{Args: args, Env: env, Kubeconfig: s.cp.AgentKubeconfig(t, s.node, node)})
	s.a.UseContainerPorts(c)
	s.a.WaitHTTP(t, s.a.ProbePort, c.LivenessProbe.HTTPGet.Path)
	s.metricsAddr = fmt.Sprintf("192.0.2.10:%d", s.a.MetricsPort)
	s.probeAddr = fmt.Sprintf("127.0.0.1:%d", s.a.ProbePort)
	return s
}

// attackDuration is how long each attack lasts: NODEADDR_LISTENER_FLOOD (5m for the full attack), else 25 s.
func attackDuration(t *testing.T) time.Duration {
	t.Helper()
	d := 25 * time.Second
	if v := os.Getenv("NODEADDR_LISTENER_FLOOD"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("NODEADDR_LISTENER_FLOOD=%q: %v", v, err)
		}
	}
	t.Logf("attack duration %v (NODEADDR_LISTENER_FLOOD)", d)
	return d
}

// agentMetric scrapes the agent as Prometheus and returns the sum of the series whose name and
// labels start with prefix.
func agentMetric(t *testing.T, s *listenerSite, token, prefix string) float64 {
	t.Helper()
	code, body, err := harness.ScrapeWith(harness.ScraperClient(s.prom, true), s.metricsAddr, token)
	if err != nil || code != 200 {
		t.Fatalf("scrape for %s: %d %v", prefix, code, err)
	}
	sum := 0.0
	for k, v := range harness.ParseMetrics(body) {
		if strings.HasPrefix(k, prefix) {
			sum += v
		}
	}
	return sum
}

// scrapeEvery scrapes with each client every interval until ctx ends; every scrape must succeed.
// token returns the token of the n-th round.
func scrapeEvery(ctx context.Context, t *testing.T, s *listenerSite, interval time.Duration, token func(n int) string, clients map[string]*http.Client) int {
	t.Helper()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	n := 0
	for ; ; n++ {
		for name, hc := range clients {
			if code, _, err := harness.ScrapeWith(hc, s.metricsAddr, token(n)); err != nil || code != 200 {
				t.Errorf("scrape %d (%s) under attack: %d %v", n, name, code, err)
			}
		}
		select {
		case <-ctx.Done():
			return n + 1
		case <-tick.C:
		}
	}
}

// randomToken is a bearer token nobody issued.
func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// A token flood: one host sends 50 random bearer tokens a second (each on a new
// TLS connection) while Prometheus scrapes every 2 s and its projected token rotates every 8 s
// (each rotation is a token the agent has not seen): every scrape succeeds, and the TokenReviews
// the API server receives stay within the flooding source's budget plus Prometheus' own.
func TestListenersTokenFlood(t *testing.T) {
	harness.RequireE2E(t)
	s := startListenerSite(t)
	d := attackDuration(t)
	tokens := []string{harness.ScraperToken(t, s.cp)}
	prom := harness.ScraperClient(s.prom, false)
	if code, _, err := harness.ScrapeWith(prom, s.metricsAddr, tokens[0]); err != nil || code != 200 {
		t.Fatalf("scrape before the flood: %d %v", code, err)
	}
	tr0, sar0 := reviews(t, s.cp)

	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var sent, throttled atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { floodTokens(ctx, s.router, s.metricsAddr, 50, &sent, &throttled) })
	scrapes := scrapeEvery(ctx, t, s, 2*time.Second, func(n int) string {
		if n > 0 && n%4 == 0 { // the kubelet rotated Prometheus' projected token
			tokens = append(tokens, harness.CreateServiceAccountToken(t, s.cp, "monitoring", harness.ScraperSA, "nodeaddr-metrics-reader", harness.ScraperAudience))
		}
		return tokens[len(tokens)-1]
	}, map[string]*http.Client{"prometheus": prom})
	wg.Wait()

	tr1, sar1 := reviews(t, s.cp)
	seconds := int(d/time.Second) + 1
	// The flooding source: a burst of 3, then 1 a second. Prometheus: one review per new token and
	// one per expiry of its cached decision (2 minutes).
	bound := 3 + seconds + len(tokens) + seconds/120 + 1
	t.Logf("flood: %d random tokens in %v (%d answered 429); %d scrapes with %d tokens (failures above); API: %d TokenReviews, %d SubjectAccessReviews (bound %d TokenReviews)",
		sent.Load(), d, throttled.Load(), scrapes, len(tokens), tr1-tr0, sar1-sar0, bound)
	if tr1-tr0 > bound {
		t.Errorf("%d TokenReviews during the flood, want at most %d", tr1-tr0, bound)
	}
	if throttled.Load() == 0 {
		t.Errorf("no random token was answered 429: the flood never reached the review budget")
	}
}

// floodTokens sends perSecond requests with random tokens from ns, each on a new TLS connection,
// until ctx ends.
func floodTokens(ctx context.Context, ns *harness.Netns, addr string, perSecond int, sent, throttled *atomic.Int64) {
	hc := harness.ScraperClient(ns, true)
	hc.Timeout = 5 * time.Second
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var inflight atomic.Int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if inflight.Load() > int64(2*perSecond) {
			continue
		}
		inflight.Add(1)
		sent.Add(1)
		wg.Go(func() {
			defer inflight.Add(-1)
			if code, _, _ := harness.ScrapeWith(hc, addr, randomToken()); code == http.StatusTooManyRequests {
				throttled.Add(1)
			}
		})
	}
}

// holdConnections keeps n connections from ns to addr open until ctx ends, as a hostile client
// does: each connects (in TLS mode completes the handshake), sends nothing or (slow) a request
// header byte by byte, and reconnects after a pause once the server closes it. It returns once all
// n are connected the first time.
func holdConnections(ctx context.Context, t *testing.T, ns *harness.Netns, addr string, n int, mode string, closed *atomic.Int64) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	var first sync.WaitGroup
	first.Add(n)
	for i := 0; i < n; i++ {
		wg.Go(func() {
			once := sync.OnceFunc(first.Done)
			defer once()
			for ctx.Err() == nil {
				holdOne(ctx, ns, addr, mode, once)
				closed.Add(1)
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
	first.Wait()
	return &wg
}

func holdOne(ctx context.Context, ns *harness.Netns, addr, mode string, connected func()) {
	c, err := ns.Dial(ctx, addr)
	if err != nil {
		return
	}
	defer c.Close()
	context.AfterFunc(ctx, func() { c.Close() })
	connected()
	var conn net.Conn = c
	if mode != "idle" {
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true})
		if tc.HandshakeContext(ctx) != nil {
			return
		}
		conn = tc
	}
	if mode == "slow-header" {
		for _, b := range []byte("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + randomToken() + "\r\n") {
			if _, err := conn.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(300 * time.Millisecond) // measured window: one header byte every 300 ms
		}
	}
	_, _ = io.Copy(io.Discard, conn) // until the server closes it
}

// An idle-connection flood: one host holds 48 connections to :9810 open (idle TCP, idle
// TLS, request headers sent byte by byte) and reconnects whenever the agent closes one, while
// Prometheus scrapes every 2 s over its keep-alive connection and over a new connection each time
// (a restarted Prometheus): every scrape succeeds.
func TestListenersIdleConnectionFlood(t *testing.T) {
	harness.RequireE2E(t)
	s := startListenerSite(t)
	d := attackDuration(t)
	token := harness.ScraperToken(t, s.cp)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var closed atomic.Int64
	var attackers []*sync.WaitGroup
	for _, mode := range []string{"idle", "idle-tls", "slow-header"} {
		attackers = append(attackers, holdConnections(ctx, t, s.router, s.metricsAddr, 16, mode, &closed))
	}
	scrapes := scrapeEvery(ctx, t, s, 2*time.Second, func(int) string { return token },
		map[string]*http.Client{"keep-alive": harness.ScraperClient(s.prom, false), "new connection": harness.ScraperClient(s.prom, true)})
	for _, wg := range attackers {
		wg.Wait()
	}
	budget := agentMetric(t, s, token, `nodeaddr_listener_connections_closed_total{listener="metrics"`)
	t.Logf("%d scrape rounds (failures above) while 48 connections were held from one host; the attacker's connections were closed %d times (agent: %v by the budget)",
		scrapes, closed.Load(), budget)
	if budget == 0 {
		t.Errorf("the agent closed no connection for its budget: the attack never reached it")
	}
}

// A probe-port flood: a neighbour on the node (any hostNetwork pod shares its
// loopback) holds 96 idle connections to the probe port and reconnects whenever one is closed,
// while the kubelet probes as it does (a new connection per probe, GET /healthz, 1 s timeout):
// every probe succeeds.
func TestListenersProbePortFlood(t *testing.T) {
	harness.RequireE2E(t)
	s := startListenerSite(t)
	d := attackDuration(t)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var closed atomic.Int64
	attacker := holdConnections(ctx, t, s.node, s.probeAddr, 96, "idle", &closed)
	kubelet := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, a string) (net.Conn, error) { return s.node.Dial(ctx, a) },
		DisableKeepAlives: true,
	}}
	probes, failed := 0, 0
	for ctx.Err() == nil {
		resp, err := kubelet.Get("http://" + s.probeAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		if err != nil || resp.StatusCode != 200 {
			failed++
			t.Errorf("probe %d with 96 connections held: %v %v", probes, resp, err)
		}
		probes++
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	attacker.Wait()
	token := harness.ScraperToken(t, s.cp)
	budget := agentMetric(t, s, token, `nodeaddr_listener_connections_closed_total{listener="probes"`)
	t.Logf("%d probes, %d failed; the neighbour's connections were closed %d times (agent: %v by the budget)", probes, failed, closed.Load(), budget)
	if budget == 0 {
		t.Errorf("the agent closed no probe connection for its budget: the attack never reached it")
	}
}

// Token replay, on the real API server: the agent accepts Prometheus' token for the audience
// nodeaddr and refuses its ServiceAccount token for the API server's audience; the nodeaddr token,
// replayed against kube-apiserver by a compromised agent, gets 401, where the default token would
// have listed the pods Prometheus may list.
func TestScraperTokenAudience(t *testing.T) {
	harness.RequireE2E(t)
	s := startListenerSite(t)
	ctx := context.Background()
	audienceToken := harness.ScraperToken(t, s.cp)
	defaultToken := harness.CreateServiceAccountToken(t, s.cp, "monitoring", harness.ScraperSA, "nodeaddr-metrics-reader")
	// Prometheus lists pods for its service discovery.
	if _, err := s.cp.Admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-discovery"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.CreateServiceAccountToken(t, s.cp, "monitoring", harness.ScraperSA, "prometheus-discovery")

	prom := harness.ScraperClient(s.prom, true)
	if code, body, err := harness.ScrapeWith(prom, s.metricsAddr, audienceToken); err != nil || code != 200 || !containsMetric(body) {
		t.Errorf("token for the audience nodeaddr: %d %v, want 200 with metrics", code, err)
	}
	if code, body, err := harness.ScrapeWith(prom, s.metricsAddr, defaultToken); err != nil || code != 401 || containsMetric(body) {
		t.Errorf("ServiceAccount token for the API server's audience: %d %v, want 401 without metrics", code, err)
	}
	replay := func(token string) int {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/api/v1/namespaces/kube-system/pods", s.cp.Port), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := replay(audienceToken); code != 401 {
		t.Errorf("the nodeaddr token replayed against kube-apiserver: %d, want 401", code)
	}
	if code := replay(defaultToken); code != 200 {
		t.Errorf("the default token against kube-apiserver: %d, want 200 (what a replay would have got)", code)
	}
}

func containsMetric(body string) bool { return strings.Contains(body, "nodeaddr_build_info") }
