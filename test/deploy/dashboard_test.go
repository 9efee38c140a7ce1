package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// dashboard is the part of deploy/monitoring/dashboard.json the tests read.
type dashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(deployFile("monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatal("dashboard.json has no uid or no panels")
	}
	return d
}

// dashboardQueries are the dashboard's PromQL expressions, with Grafana's variables replaced as
// Grafana would for "all clusters", job nodeaddr, "all nodes" and a 15s rate interval; each query
// variable's label_values() becomes its series selector.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	d := readDashboard(t)
	r := strings.NewReplacer(`"$node"`, `".*"`, `"$cluster"`, `".*"`, `"$job"`, `"nodeaddr"`,
		"$__rate_interval", "15s", "$__interval", "5s", "$__range", "1m")
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %d has no expression", p.Title, i)
				continue
			}
			out[fmt.Sprintf("%s #%d", p.Title, i)] = r.Replace(tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		sel, ok := strings.CutPrefix(v.Definition, "label_values(")
		if !ok {
			t.Errorf("variable %s: %q is not label_values(...)", v.Name, v.Definition)
			continue
		}
		i := strings.LastIndex(sel, ",")
		out["variable "+v.Name] = r.Replace(strings.TrimSpace(sel[:i]))
	}
	return out
}

// servicemonitorScrapeConfig derives a Prometheus scrape job from deploy/monitoring's ServiceMonitor
// and Service, as the Prometheus Operator would, for one agent reached at target: the job name from
// jobLabel, the path, the scheme, TLS settings and bearer token file (tokenFile stands for the
// ServiceAccount token file the ServiceMonitor names, which Prometheus's pod would have mounted),
// and the relabelings (fed by the meta label Kubernetes discovery would set). tokenFile holds a
// token for the audience nodeaddr, as the projected volume of docs/metrics.md does.
func servicemonitorScrapeConfig(t *testing.T, target, node, tokenFile string) string {
	t.Helper()
	var sm struct {
		Spec struct {
			JobLabel  string `json:"jobLabel"`
			Endpoints []struct {
				Port            string `json:"port"`
				Path            string `json:"path"`
				Scheme          string `json:"scheme"`
				BearerTokenFile string `json:"bearerTokenFile"`
				TLSConfig       *struct {
					InsecureSkipVerify bool `json:"insecureSkipVerify"`
				} `json:"tlsConfig"`
				Relabelings []struct {
					SourceLabels []string `json:"sourceLabels"`
					TargetLabel  string   `json:"targetLabel"`
					Action       string   `json:"action"`
				} `json:"relabelings"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	var svc struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	for file, v := range map[string]any{"servicemonitor.yaml": &sm, "service.yaml": &svc} {
		data, err := os.ReadFile(deployFile("monitoring", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor has %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	job := svc.Metadata.Labels[sm.Spec.JobLabel]
	if job != "nodeaddr" {
		t.Fatalf("the ServiceMonitor's jobLabel %q gives job %q, the alerts and dashboard expect nodeaddr", sm.Spec.JobLabel, job)
	}
	type relabel struct {
		SourceLabels []string `json:"source_labels"`
		TargetLabel  string   `json:"target_label"`
		Action       string   `json:"action"`
	}
	var rl []relabel
	for _, r := range ep.Relabelings {
		rl = append(rl, relabel{r.SourceLabels, r.TargetLabel, r.Action})
	}
	scrapeCfg := map[string]any{
		"job_name":     job,
		"metrics_path": ep.Path,
		"static_configs": []any{map[string]any{
			"targets": []string{target},
			"labels": map[string]string{
				"__meta_kubernetes_pod_node_name": node,
				"namespace":                       "kube-system",
				"pod":                             "nodeaddr-test",
			},
		}},
		"relabel_configs": rl,
	}
	if ep.Scheme != "" {
		scrapeCfg["scheme"] = ep.Scheme
	}
	if ep.TLSConfig != nil {
		scrapeCfg["tls_config"] = map[string]any{"insecure_skip_verify": ep.TLSConfig.InsecureSkipVerify}
	}
	if ep.BearerTokenFile != "" {
		if ep.BearerTokenFile != "/var/run/secrets/nodeaddr/token" {
			t.Errorf("ServiceMonitor bearerTokenFile %q is not the projected nodeaddr token of docs/metrics.md", ep.BearerTokenFile)
		}
		// What the operator generates for bearerTokenFile.
		scrapeCfg["authorization"] = map[string]any{"type": "Bearer", "credentials_file": tokenFile}
	}
	cfg := map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"scrape_configs": []any{scrapeCfg},
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// hostRelay listens on the host's loopback and forwards each connection to addr inside ns: Prometheus,
// on the host, scrapes the agent inside its network namespace.
func hostRelay(t *testing.T, ns *harness.Netns, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				up, err := ns.Dial(ctx, addr)
				cancel()
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(up, c); done <- struct{}{} }()
				go func() { io.Copy(c, up); done <- struct{}{} }()
				<-done
			})
		}
	})
	return l.Addr().String()
}

type promResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	} `json:"data"`
}

func promQuery(base, q string) (promResponse, error) {
	var pr promResponse
	resp, err := http.Get(base + "/api/v1/query?" + url.Values{"query": {q}}.Encode())
	if err != nil {
		return pr, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &pr); err != nil {
		return pr, fmt.Errorf("%v: %s", err, body)
	}
	return pr, nil
}

// Debian's Prometheus (2.42) scrapes a running agent with a scrape job derived from the
// ServiceMonitor (HTTPS, the token of a ServiceAccount the agent allows), and every query
// of the dashboard parses there and returns data, as does every metric the alert rules use.
func TestDashboardQueriesReturnData(t *testing.T) {
	harness.RequireE2E(t)
	prometheus := harness.Tool(t, "prometheus", "prometheus")
	queries := dashboardQueries(t)

	const node = "worker-1"
	h := harness.NewHost(t, node)
	h.CP.CreateNode(t, harness.NodeSpec{Name: node, Taints: []corev1.Taint{harness.Uninitialized},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node}}})
	h.Uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	h.Uplink6("eth0", "2001:db8::10/64", "2001:db8::1", 100)
	// Secure metrics, as the DaemonSet serves them: Prometheus scrapes with its ServiceAccount token,
	// which the ConfigMap's metrics-allowed-scrapers lists.
	a := h.Start("--internal-ip-target=192.0.2.1", "--resync-interval=2s", "--metrics-secure=true",
		"--metrics-allowed-scrapers=system:serviceaccount:monitoring:"+scraperSA)
	token := scraperToken(t, h.CP)
	agentMetrics := fmt.Sprintf("127.0.0.1:%d", a.MetricsPort)
	h.CP.WaitNode(t, node, 30*time.Second, "published", func(n *corev1.Node) bool { return len(n.Status.Addresses) >= 3 })
	// A change after start: a kernel event, a resolution and a write, so the reaction histogram has
	// an observation.
	h.NS.IP("addr", "add", "192.0.2.20/24", "dev", "eth0")
	h.NS.IP("addr", "del", "192.0.2.10/24", "dev", "eth0")
	// (Best effort: a histogram without observations still answers, with NaN quantiles.)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if code, body, err := scrape(a.NS, agentMetrics, token); err == nil && code == 200 &&
			harness.ParseMetrics(body)["nodeaddr_reaction_seconds_count"] >= 2 {
			break
		}
	}

	// Every metric the dashboard names is exposed by the agent.
	code, body, err := scrape(a.NS, agentMetrics, token)
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	for _, q := range queries {
		for _, name := range metricRE.FindAllString(q, -1) {
			base := name
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suf); ok && strings.Contains(body, "\n# TYPE "+b+" histogram") {
					base = b
				}
			}
			if !strings.Contains(body, "\n# TYPE "+base+" ") {
				t.Errorf("the dashboard uses %s, which /metrics does not expose", name)
			}
		}
	}

	target := hostRelay(t, a.NS, agentMetrics)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := servicemonitorScrapeConfig(t, target, node, tokenFile)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(prometheus, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+listen, "--log.level=warn")
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	promLog := func() string { b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log")); return string(b) }
	base := "http://" + listen

	// Wait for a few successful scrapes: rates need two samples in their window.
	deadline := time.Now().Add(60 * time.Second)
	for {
		pr, err := promQuery(base, `count_over_time(up{job="nodeaddr", node="`+node+`"}[15s]) >= 5 and up == 1`)
		if err == nil && pr.Status == "success" && len(pr.Data.Result) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus did not scrape the agent (%v %+v)\nconfig:\n%s\nlog:\n%s", err, pr, cfg, promLog())
		}
		time.Sleep(500 * time.Millisecond)
	}
	for name, q := range queries {
		pr, err := promQuery(base, q)
		switch {
		case err != nil:
			t.Errorf("%s: %s: %v", name, q, err)
		case pr.Status != "success":
			t.Errorf("%s: %s: %s: %s", name, q, pr.ErrorType, pr.Error)
		case len(pr.Data.Result) == 0:
			t.Errorf("%s: %s: no data", name, q)
		case strings.HasPrefix(name, "variable ") && !strings.Contains(string(pr.Data.Result[0]), `"node":"`+node+`"`):
			t.Errorf("%s: %s: the series lack node=%q (the ServiceMonitor's relabeling): %s", name, q, node, pr.Data.Result[0])
		default:
			t.Logf("%s: %s: %d series", name, q, len(pr.Data.Result))
		}
	}
	for _, name := range baseRuleMetrics(t) {
		if pr, err := promQuery(base, name+`{job="nodeaddr"}`); err != nil || pr.Status != "success" || len(pr.Data.Result) == 0 {
			t.Errorf("the alerts use %s: Prometheus has no series (%v %+v)", name, err, pr)
		}
	}
}
