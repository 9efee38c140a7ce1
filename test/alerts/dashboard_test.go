package alerts

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
	"slices"
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
	data, err := os.ReadFile(harness.DeployFile("monitoring", "dashboard.json"))
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
// Grafana would for "all clusters", job nodeaddr (the approver's nodeaddr-approver), "all nodes"
// and a 15s rate interval; each query variable's label_values() becomes its series selector. The
// keys are "TITLE #N" (the panel's Nth query) and "variable NAME".
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	d := readDashboard(t)
	r := strings.NewReplacer(`"$node"`, `".*"`, `"$cluster"`, `".*"`, `"$job"`, `"nodeaddr"`, `"${job}-approver"`, `"nodeaddr-approver"`,
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
// token for the audience nodeaddr, as the projected volume of docs/metrics.md does. Each target is
// one agent (one pod of the DaemonSet) on its node.
func servicemonitorScrapeConfig(t *testing.T, tokenFile string, targets ...scrapeTarget) string {
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
		data, err := os.ReadFile(harness.DeployFile("monitoring", file))
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
	var static []any
	for _, tg := range targets {
		static = append(static, map[string]any{
			"targets": []string{tg.addr},
			"labels": map[string]string{
				"__meta_kubernetes_pod_node_name": tg.node,
				"namespace":                       "kube-system",
				"pod":                             "nodeaddr-" + tg.node,
			},
		})
	}
	scrapeCfg := map[string]any{
		"job_name":        job,
		"metrics_path":    ep.Path,
		"static_configs":  static,
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

// scrapeTarget is one agent Prometheus scrapes: the address it dials and the node it runs on.
type scrapeTarget struct{ addr, node string }

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

// Debian's Prometheus (2.42) scrapes two running agents with a scrape job derived from the
// ServiceMonitor (HTTPS, the token of a ServiceAccount the agent allows) and the approver, and
// every query of the dashboard parses there and returns data, as does every metric the alert rules
// use; the queries of the STUN series an agent creates only with discovery servers parse (the
// agents run without discovery). Then one agent is stopped, as a crashed pod or a refused
// scrape leaves it: "Agents up" reads 1 up of 2 targets and 1 down (not 1 of 1, as a count of
// the agents' own series would, which vanish with the target), the node variable still lists the
// stopped node, and of the alert expressions only NodeaddrDown's has a result (half the fleet).
func TestDashboardQueriesReturnData(t *testing.T) {
	harness.RequireE2E(t)
	prometheus := harness.Tool(t, "prometheus", "prometheus")
	queries := dashboardQueries(t)

	const node, node2 = "worker-1", "worker-2"
	h := harness.NewHost(t, node)
	h.CP.CreateNode(t, harness.NodeSpec{Name: node, Taints: []corev1.Taint{harness.Uninitialized},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node}}})
	h.Uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	h.Uplink6("eth0", "2001:db8::10/64", "2001:db8::1", 100)
	// Secure metrics, as the DaemonSet serves them: Prometheus scrapes with its ServiceAccount token,
	// which the ConfigMap's metrics-allowed-scrapers lists.
	args := []string{"--internal-ip-target=192.0.2.1", "--resync-interval=2s", "--metrics-secure=true",
		"--metrics-allowed-scrapers=system:serviceaccount:monitoring:" + harness.ScraperSA}
	a := h.Start(args...)
	token := harness.ScraperToken(t, h.CP)
	agentMetrics := fmt.Sprintf("127.0.0.1:%d", a.MetricsPort)
	h.CP.WaitNode(t, node, 30*time.Second, "published", func(n *corev1.Node) bool { return len(n.Status.Addresses) >= 3 })
	// The second agent, on its own node, in the same cluster.
	h2 := harness.NewHostOn(t, h.CP, node2)
	h2.CP.CreateNode(t, harness.NodeSpec{Name: node2, Taints: []corev1.Taint{harness.Uninitialized},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node2}}})
	h2.Uplink("eth0", "192.0.2.11/24", "192.0.2.1", 100)
	a2 := h2.Start(args...)
	h.CP.WaitNode(t, node2, 30*time.Second, "published", func(n *corev1.Node) bool { return len(n.Status.Addresses) >= 2 })
	// The kubelet-serving-csr component's approver, for the approver's panels.
	if err := h.CP.ApplyManifest(context.Background(), harness.DeployFile("components", "kubelet-serving-csr", "rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	approver := harness.StartApprover(t, h.CP)
	// A change after start: a kernel event, a resolution and a write, so the reaction histogram has
	// an observation.
	h.NS.IP("addr", "add", "192.0.2.20/24", "dev", "eth0")
	h.NS.IP("addr", "del", "192.0.2.10/24", "dev", "eth0")
	// (Best effort: a histogram without observations still answers, with NaN quantiles.)
	_ = harness.Poll(10*time.Second, 200*time.Millisecond, "two reaction observations", func() (bool, string) {
		code, body, err := harness.Scrape(a.NS, agentMetrics, token)
		return err == nil && code == 200 && harness.ParseMetrics(body)["nodeaddr_reaction_seconds_count"] >= 2, ""
	})

	// Every metric the dashboard names is exposed by the agent, or is the approver's, or is a
	// series the agent creates only with discovery servers (conditionalMetrics); the queries on
	// those may find no data here, as may a query keeping only what is above 0 (CSRs left pending).
	code, body, err := harness.Scrape(a.NS, agentMetrics, token)
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	approverGolden, err := os.ReadFile(filepath.Join("testdata", "metrics-approval.golden"))
	if err != nil {
		t.Fatal(err)
	}
	mayBeEmpty := map[string]bool{}
	for qname, q := range queries {
		for _, name := range harness.MetricRE.FindAllString(q, -1) {
			base := name
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suf); ok && (strings.Contains(body, "\n# TYPE "+b+" histogram") ||
					strings.Contains(string(approverGolden), "\n# TYPE "+b+" histogram")) {
					base = b
				}
			}
			switch {
			case strings.Contains(body, "\n# TYPE "+base+" "), strings.Contains(string(approverGolden), "\n# TYPE "+base+" "):
			case isConditionalMetric(t, base):
				mayBeEmpty[qname] = true
			default:
				t.Errorf("the dashboard uses %s, which neither the agent's nor the approver's /metrics exposes", name)
			}
		}
		if strings.HasSuffix(q, "> 0") {
			mayBeEmpty[qname] = true
		}
	}

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := servicemonitorScrapeConfig(t, tokenFile,
		scrapeTarget{hostRelay(t, a.NS, agentMetrics), node},
		scrapeTarget{hostRelay(t, a2.NS, fmt.Sprintf("127.0.0.1:%d", a2.MetricsPort)), node2})
	// And the approver's job, as its ServiceMonitor (deploy/monitoring/servicemonitor.yaml) makes
	// it: job nodeaddr-approver, plain HTTP.
	var promCfg map[string]any
	if err := yaml.Unmarshal([]byte(cfg), &promCfg); err != nil {
		t.Fatal(err)
	}
	promCfg["scrape_configs"] = append(promCfg["scrape_configs"].([]any), map[string]any{
		"job_name": "nodeaddr-approver", "metrics_path": "/metrics",
		"static_configs": []any{map[string]any{"targets": []string{fmt.Sprintf("127.0.0.1:%d", approver.Port)},
			"labels": map[string]string{"namespace": "kube-system", "pod": "nodeaddr-approver-test"}}},
	})
	b, err := yaml.Marshal(promCfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = string(b)
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

	// waitFor polls q until its only sample has the value want.
	waitFor := func(what, q, want string, timeout time.Duration) {
		t.Helper()
		if err := harness.Poll(timeout, 500*time.Millisecond, fmt.Sprintf("%s: %s is %s", what, q, want), func() (bool, string) {
			pr, err := promQuery(base, q)
			return err == nil && pr.Status == "success" && len(pr.Data.Result) == 1 && sampleValue(pr.Data.Result[0]) == want,
				fmt.Sprintf("%v %+v", err, pr)
		}); err != nil {
			t.Fatalf("%v\nconfig:\n%s\nlog:\n%s", err, cfg, promLog())
		}
	}
	// Wait for a few successful scrapes of both: rates need two samples in their window.
	waitFor("Prometheus scrapes both agents", `count(count_over_time(up{job="nodeaddr"}[15s]) >= 5 and up == 1)`, "2", 60*time.Second)
	waitFor("Prometheus scrapes the approver", `count(count_over_time(up{job="nodeaddr-approver"}[15s]) >= 5 and up == 1)`, "1", 30*time.Second)
	for name, q := range queries {
		pr, err := promQuery(base, q)
		switch {
		case err != nil:
			t.Errorf("%s: %s: %v", name, q, err)
		case pr.Status != "success":
			t.Errorf("%s: %s: %s: %s", name, q, pr.ErrorType, pr.Error)
		case len(pr.Data.Result) == 0 && mayBeEmpty[name]:
			t.Logf("%s: %s: parses; no data (discovery does not run here, no CSR is pending)", name, q)
		case len(pr.Data.Result) == 0:
			t.Errorf("%s: %s: no data", name, q)
		case name == "variable node" && !strings.Contains(string(pr.Data.Result[0]), `"node":"`):
			t.Errorf("%s: %s: the series lack node (the ServiceMonitor's relabeling): %s", name, q, pr.Data.Result[0])
		default:
			t.Logf("%s: %s: %d series", name, q, len(pr.Data.Result))
		}
	}
	for _, name := range harness.BaseRuleMetrics(t) {
		if pr, err := promQuery(base, name+`{job="nodeaddr"}`); err != nil || pr.Status != "success" || len(pr.Data.Result) == 0 {
			t.Errorf("the alerts use %s: Prometheus has no series (%v %+v)", name, err, pr)
		}
	}

	// One agent stops: its target is down, its own series go stale at the next failed scrape.
	a2.Stop()
	waitFor("the stopped agent's target is down", `up{job="nodeaddr", node="`+node2+`"}`, "0", 30*time.Second)
	waitFor("the stopped agent's series are stale", `count(nodeaddr_build_info{job="nodeaddr"})`, "1", 30*time.Second)
	for name, want := range map[string]string{"Agents up #0": "1", "Agents up #1": "2", "Agents up #2": "1"} {
		q, ok := queries[name]
		if !ok {
			t.Errorf("the dashboard has no query %s", name)
			continue
		}
		pr, err := promQuery(base, q)
		if err != nil || pr.Status != "success" || len(pr.Data.Result) != 1 || sampleValue(pr.Data.Result[0]) != want {
			t.Errorf("one of two agents stopped: %s (%s) = %v %+v, want %s", name, q, err, pr, want)
		}
	}
	pr, err := promQuery(base, queries["variable node"])
	var series []string
	for _, r := range pr.Data.Result {
		series = append(series, string(r))
	}
	if err != nil || pr.Status != "success" || !strings.Contains(strings.Join(series, "\n"), `"node":"`+node2+`"`) {
		t.Errorf("one agent stopped: the node variable (%s) does not list %s: %v %s", queries["variable node"], node2, err, series)
	}
	firing := map[string]string{}
	for _, g := range harness.ReadRules(t).Spec.Groups {
		for _, r := range g.Rules {
			pr, err := promQuery(base, r.Expr)
			if err != nil || pr.Status != "success" {
				t.Errorf("%s: %s: %v %+v", r.Alert, r.Expr, err, pr)
				continue
			}
			for _, res := range pr.Data.Result {
				firing[r.Alert] = sampleValue(res)
			}
		}
	}
	if want := map[string]string{"NodeaddrDown": "0.5"}; fmt.Sprint(firing) != fmt.Sprint(want) {
		t.Errorf("one of two agents stopped: the alert expressions with a result are %v, want %v (before their for)", firing, want)
	}
}

// sampleValue is the value of one sample of an instant query's vector result, as Prometheus
// writes it ("1", "0.5"); empty when it is not a sample.
func sampleValue(raw json.RawMessage) string {
	var s struct {
		Value [2]any `json:"value"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	v, _ := s.Value[1].(string)
	return v
}

// conditionalMetrics are agent metrics /metrics and the golden file cannot show: vectors with no
// series until external-address discovery has servers (the probes) or a round agreed (the last
// success). isConditionalMetric checks the name against its registration in
// resolver/discovery/metrics.go, so that a renamed metric still breaks the tests.
var conditionalMetrics = []string{"nodeaddr_discovery_probes_total", "nodeaddr_discovery_last_success_timestamp_seconds"}

func isConditionalMetric(t *testing.T, name string) bool {
	t.Helper()
	if !slices.Contains(conditionalMetrics, name) {
		return false
	}
	src, err := os.ReadFile(filepath.Join(harness.RepoDir(), "resolver", "discovery", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(src), `Name: "`+name+`"`)
}
