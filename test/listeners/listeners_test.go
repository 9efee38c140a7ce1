package listeners

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// reviews counts the agent's TokenReviews and SubjectAccessReviews in the audit log.
func reviews(t *testing.T, cp *harness.ControlPlane) (tokenReviews, accessReviews int) {
	t.Helper()
	evs, err := cp.Audit(harness.AgentUser)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.ObjectRef == nil || e.Verb != "create" {
			continue
		}
		switch e.ObjectRef.Resource {
		case "tokenreviews":
			tokenReviews++
		case "subjectaccessreviews":
			accessReviews++
		}
	}
	return tokenReviews, accessReviews
}

// hugeHeader sends one request with a 1 MiB header to addr from ns (over TLS if secure) and returns
// the response's status line. The request is written while the answer is read: the server refuses
// before it has read the header.
func hugeHeader(ns *harness.Netns, addr string, secure bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := ns.Dial(ctx, addr)
	if err != nil {
		return "", err
	}
	c := raw
	if secure {
		tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true})
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return "", err
		}
		c = tc
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 1<<20))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// rssAnonKiB reads RssAnon from /proc/PID/status of the running agent.
func rssAnonKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var v string
	for _, l := range strings.Split(string(b), "\n") {
		if k, val, ok := strings.Cut(l, ":"); ok && k == "RssAnon" {
			v = strings.TrimSpace(val)
		}
		if k, val, ok := strings.Cut(l, ":"); ok && k == "Name" && !strings.HasPrefix(strings.TrimSpace(val), "nodeaddr") {
			t.Fatalf("pid %d is %q, not nodeaddr", pid, strings.TrimSpace(val))
		}
	}
	kib, err := strconv.Atoi(strings.TrimSuffix(v, " kB"))
	if err != nil {
		t.Fatalf("RssAnon %q: %v", v, err)
	}
	return kib
}

// The DaemonSet's listeners, with the real binary run as the DaemonSet runs it in a node namespace
// and a second host (the router namespace) on its network: the probes are not reachable from the
// network; /metrics answers only over TLS, only to a token allowed get /metrics, and costs no API
// request per scrape once the scraper is known; a 1 MiB header gets 431 on both listeners and
// leaves the agent's anonymous memory small.
func TestListenersOnTheHostNetwork(t *testing.T) {
	harness.RequireE2E(t)
	ds := harness.ShippedDaemonSet(t)
	c := ds.Spec.Template.Spec.Containers[0]
	const node = "worker-1"
	cp := harness.StartControlPlane(t)
	harness.ApplyRBACAndPolicy(t, cp)
	cp.CreateNode(t, harness.NodeSpec{Name: node, Taints: []corev1.Taint{harness.Uninitialized},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node}}})
	promToken := harness.ScraperToken(t, cp)
	otherToken := harness.CreateServiceAccountToken(t, cp, "default", "app", "", harness.ScraperAudience)
	cm, err := cp.Admin.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "nodeaddr", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	ns := harness.NewNetns(t, "ds")
	router := harness.NewNetns(t, "rtr")
	ns.Link("eth0", router, "r-eth0")
	ns.IP("addr", "add", "192.0.2.10/24", "dev", "eth0")
	ns.IP("route", "add", "default", "via", "192.0.2.1", "dev", "eth0")
	router.IP("addr", "add", "192.0.2.1/24", "dev", "r-eth0")

	env, args := harness.PodEnv(t, c, node, map[string]map[string]string{cm.Name: cm.Data})
	a := harness.StartAgent(t, ns, harness.AgentOptions{Args: args, Env: env, Kubeconfig: cp.AgentKubeconfig(t, ns, node)})
	a.UseContainerPorts(c)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p.HTTPGet.Host != "127.0.0.1" {
			t.Errorf("probe %s has host %q, want 127.0.0.1", p.HTTPGet.Path, p.HTTPGet.Host)
		}
		a.WaitHTTP(t, a.ProbePort, p.HTTPGet.Path) // the kubelet's request, on loopback
	}
	remoteMetrics := fmt.Sprintf("192.0.2.10:%d", a.MetricsPort)
	t.Logf("RssAnon %d KiB once ready, before any scrape", rssAnonKiB(t, a.Pid()))

	// From the other host: no probe port at all.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if conn, err := router.Dial(ctx, fmt.Sprintf("192.0.2.10:%d", a.ProbePort)); err == nil {
		conn.Close()
		t.Errorf("the probe port %d accepts connections from another host", a.ProbePort)
	}
	cancel()

	// Plain HTTP gets no metrics.
	resp, err := router.HTTPClient().Get("http://" + remoteMetrics + "/metrics")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "nodeaddr_") {
			t.Errorf("plain HTTP from another host got metrics: %d", resp.StatusCode)
		}
	}
	// Over TLS: no token 401, a forged token 401, a token without the role 403; never metrics.
	for _, tc := range []struct {
		what, token string
		want        int
	}{{"no token", "", 401}, {"a forged token", "not-a-token", 401}, {"a ServiceAccount without the role", otherToken, 403}} {
		code, body, err := harness.Scrape(router, remoteMetrics, tc.token)
		if err != nil || code != tc.want || strings.Contains(body, "nodeaddr_") {
			t.Errorf("%s: %d %v, want %d without metrics (metrics in body: %v)", tc.what, code, err, tc.want, strings.Contains(body, "nodeaddr_"))
		}
	}

	// Prometheus's token: the first scrape costs one TokenReview and no SubjectAccessReview (the
	// ConfigMap's metrics-allowed-scrapers decides), the following ones none.
	tr0, sar0 := reviews(t, cp)
	code, body, err := harness.Scrape(router, remoteMetrics, promToken)
	if err != nil || code != 200 || !strings.Contains(body, "nodeaddr_build_info") {
		t.Fatalf("Prometheus's token: %d %v\n%.300s", code, err, body)
	}
	tr1, sar1 := reviews(t, cp)
	if tr1-tr0 != 1 || sar1-sar0 != 0 {
		t.Errorf("first scrape: %d TokenReviews, %d SubjectAccessReviews, want 1 and 0", tr1-tr0, sar1-sar0)
	}
	for i := 0; i < 5; i++ {
		if code, _, err := harness.Scrape(router, remoteMetrics, promToken); err != nil || code != 200 {
			t.Fatalf("scrape %d: %d %v", i+2, code, err)
		}
	}
	tr2, sar2 := reviews(t, cp)
	if tr2 != tr1 || sar2 != sar1 {
		t.Errorf("5 more scrapes cost %d TokenReviews and %d SubjectAccessReviews, want 0", tr2-tr1, sar2-sar1)
	}
	_, body, _ = harness.Scrape(router, remoteMetrics, promToken)
	m := harness.ParseMetrics(body)
	harness.Run(t, body, harness.Tool(t, "promtool", "prometheus"), "check", "metrics")
	t.Logf("API requests for the scrapes: %d TokenReviews, %d SubjectAccessReviews in the audit log; agent: %v, decisions allowed %v",
		tr2, sar2, m[`nodeaddr_metrics_auth_reviews_total{kind="tokenreview"}`], m[`nodeaddr_metrics_auth_decisions_total{result="allowed"}`])
	if got := m[`nodeaddr_metrics_auth_reviews_total{kind="tokenreview"}`]; int(got) != tr2 {
		t.Errorf("nodeaddr_metrics_auth_reviews_total{kind=tokenreview} = %v, the audit log has %d", got, tr2)
	}

	// 1 MiB headers: 431 on both listeners; through 100 of them on each, RssAnon stays under 8 MiB.
	before := rssAnonKiB(t, a.Pid())
	peak := before
	probeAddr := fmt.Sprintf("127.0.0.1:%d", a.ProbePort)
	for i := 0; i < 100; i++ {
		for _, l := range []struct {
			from   *harness.Netns
			addr   string
			secure bool
		}{{router, remoteMetrics, true}, {ns, probeAddr, false}} {
			status, err := hugeHeader(l.from, l.addr, l.secure)
			if err != nil || !strings.Contains(status, " 431 ") {
				t.Fatalf("request %d with a 1 MiB header to %s: %q %v, want 431", i, l.addr, status, err)
			}
		}
		if i%10 == 9 {
			peak = max(peak, rssAnonKiB(t, a.Pid()))
		}
	}
	_, body, _ = harness.Scrape(router, remoteMetrics, promToken)
	m = harness.ParseMetrics(body)
	t.Logf("RssAnon %d KiB before, at most %d KiB while sending 200 requests with 1 MiB headers (heap in use %.0f KiB, stacks %.0f KiB, %v goroutines)",
		before, peak, m["go_memstats_heap_inuse_bytes"]/1024, m["go_memstats_stack_inuse_bytes"]/1024, m["go_goroutines"])
	if peak >= 8<<10 {
		t.Errorf("RssAnon reached %d KiB with 1 MiB headers, want under 8 MiB", peak)
	}
	// The agent still serves after the flood.
	if code, _, err := harness.Scrape(router, remoteMetrics, promToken); err != nil || code != 200 {
		t.Errorf("scrape after the flood: %d %v", code, err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", a.Pid())); err != nil {
		t.Errorf("agent gone: %v", err)
	}
}

// The chart binds the metrics reader role to the ServiceAccounts listed, and its ServiceMonitor
// scrapes plain HTTP only when metrics are not secure.
func TestHelmMetricsReaderAndScheme(t *testing.T) {
	harness.RequireE2E(t)
	objs := harness.DecodeDocs(t, harness.HelmTemplate(t, "--set", "monitoring.enabled=true",
		"--set", "monitoring.metricsReader.bindTo[0].name=prometheus-k8s",
		"--set", "monitoring.metricsReader.bindTo[0].namespace=monitoring"))
	crb, ok := objs["ClusterRoleBinding/<nil>/nodeaddr-metrics-reader"]
	if !ok {
		t.Fatalf("no ClusterRoleBinding nodeaddr-metrics-reader in %v", slices.Collect(maps.Keys(objs)))
	}
	if got := fmt.Sprint(crb["roleRef"], crb["subjects"]); !strings.Contains(got, "name:nodeaddr-metrics-reader") ||
		!strings.Contains(got, "name:prometheus-k8s namespace:monitoring") {
		t.Errorf("binding: %s", got)
	}
	ep := func(objs map[string]harness.Object) harness.Object {
		sm := objs["ServiceMonitor/kube-system/nodeaddr"]
		return sm["spec"].(harness.Object)["endpoints"].([]any)[0].(harness.Object)
	}
	if e := ep(objs); e["scheme"] != "https" || e["bearerTokenFile"] != "/var/run/secrets/nodeaddr/token" {
		t.Errorf("secure metrics: endpoint %v", e)
	}
	plain := harness.DecodeDocs(t, harness.HelmTemplate(t, "--set", "monitoring.enabled=true",
		"--set", "config.metricsSecure=false", "--set", "config.metricsBindAddress=127.0.0.1:9810"))
	if e := ep(plain); e["scheme"] != nil || e["bearerTokenFile"] != nil || e["tlsConfig"] != nil {
		t.Errorf("config.metricsSecure=false: endpoint %v", e)
	}
	if _, ok := plain["ClusterRoleBinding/<nil>/nodeaddr-metrics-reader"]; ok {
		t.Errorf("a binding rendered without bindTo")
	}
	harness.CheckArgsParse(t, harness.RenderedArgs(t, plain))
}
