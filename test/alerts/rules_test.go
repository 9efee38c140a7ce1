package alerts

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The PrometheusRule's groups pass `promtool check rules`; `promtool test rules` (testdata/
// alerts_test.yaml) fires and resolves every alert; every alert has a runbook section.
func TestAlertRules(t *testing.T) {
	promtool := harness.Tool(t, "promtool", "prometheus")
	pr := harness.ReadRules(t)
	dir := t.TempDir()
	rules, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	harness.Run(t, "", promtool, "check", "rules", filepath.Join(dir, "rules.yaml"))

	unit, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	out := harness.Run(t, "", promtool, "test", "rules", filepath.Join(dir, "alerts_test.yaml"))
	t.Logf("promtool test rules:\n%s", out)

	// Each alert is seen firing and resolved by the unit tests.
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(unit, &tests); err != nil {
		t.Fatal(err)
	}
	fired, resolved := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			} else {
				resolved[a.Alertname] = true
			}
		}
	}
	runbooks, err := os.ReadFile(filepath.Join(harness.RepoDir(), "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !fired[r.Alert] || !resolved[r.Alert] {
				t.Errorf("%s: unit tests fire it %v, resolve it %v; want both", r.Alert, fired[r.Alert], resolved[r.Alert])
			}
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[k] == "" {
					t.Errorf("%s: no %s annotation", r.Alert, k)
				}
			}
			if r.Labels["severity"] == "" {
				t.Errorf("%s: no severity label", r.Alert)
			}
			anchor := strings.ToLower(r.Alert)
			if want := runbookBase(t) + anchor; r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q (docs/runbooks.md at VERSION's ref: run make generate)", r.Alert, r.Annotations["runbook_url"], want)
			}
			// As the mixins: a `for` on every alert, critical only where the outcome is lost.
			if r.For == "" {
				t.Errorf("%s: no for", r.Alert)
			}
			if want := map[bool]string{true: "critical", false: "warning"}[criticalAlerts[r.Alert]]; r.Labels["severity"] != want {
				t.Errorf("%s: severity %q, want %s", r.Alert, r.Labels["severity"], want)
			}
			// Every aggregation and every vector match keeps the cluster label (a Prometheus, Thanos
			// or Mimir holding several clusters): one cluster's agents never mask another's.
			for _, m := range groupingRE.FindAllStringSubmatch(r.Expr, -1) {
				if !slices.Contains(strings.Split(strings.ReplaceAll(m[2], " ", ""), ","), "cluster") {
					t.Errorf("%s: %s (%s) drops the cluster label", r.Alert, m[1], m[2])
				}
			}
			if !strings.Contains(string(runbooks), "\n## "+r.Alert+"\n") {
				t.Errorf("%s: docs/runbooks.md has no section \"## %s\"", r.Alert, r.Alert)
			}
		}
	}
}

// criticalAlerts are the alerts of a lost outcome: no agent runs, a Node has no InternalIP, or two
// Nodes list one address (the API server cannot tell which kubelet it reaches).
// Every other alert is a warning.
var criticalAlerts = map[string]bool{"NodeaddrAbsent": true, "NodeaddrNodeWithoutInternalIP": true, "NodeaddrNodeAddressConflict": true}

// groupingRE matches an aggregation's `by (...)` and a vector match's `on (...)`.
var groupingRE = regexp.MustCompile(`\b(by|on)\s*\(([^)]*)\)`)

// runbookBase is the runbook URL of the alerts without the anchor: docs/runbooks.md at the tag
// vVERSION, or at main for a development version (-dev), which has no tag.
func runbookBase(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.RepoDir(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	ref := "v" + v
	if strings.HasSuffix(v, "-dev") {
		ref = "main"
	}
	return "https://github.com/nodeaddr/nodeaddr/blob/" + ref + "/docs/runbooks.md#"
}

// The chart's alerts link the runbooks of the chart's own release: the default render (VERSION)
// as the kustomize base, and a chart packaged as 9.8.7 at the tag v9.8.7.
func TestRunbookURLsFollowTheChartVersion(t *testing.T) {
	harness.RequireE2E(t)
	urls := func(render string) []string {
		t.Helper()
		m := regexp.MustCompile(`runbook_url: (\S+)`).FindAllStringSubmatch(render, -1)
		if len(m) < 10 {
			t.Fatalf("%d runbook URLs in the render", len(m))
		}
		var out []string
		for _, u := range m {
			out = append(out, u[1])
		}
		return out
	}
	for _, u := range urls(harness.HelmTemplate(t, "--set", "monitoring.enabled=true", "--show-only", "templates/prometheusrule.yaml")) {
		if !strings.HasPrefix(u, runbookBase(t)) {
			t.Errorf("default render: runbook_url %s, want %s...", u, runbookBase(t))
		}
	}
	dir := t.TempDir()
	if _, stderr, err := harness.HelmRun(t, "package", harness.ChartDir(), "--version", "9.8.7", "--app-version", "9.8.7", "--destination", dir); err != nil {
		t.Fatalf("helm package: %v\n%s", err, stderr)
	}
	out, stderr, err := harness.HelmRun(t, "template", "nodeaddr", filepath.Join(dir, "nodeaddr-9.8.7.tgz"), "--namespace", "kube-system",
		"--set", "monitoring.enabled=true", "--show-only", "templates/prometheusrule.yaml")
	if err != nil {
		t.Fatalf("helm template of the 9.8.7 package: %v\n%s", err, stderr)
	}
	for _, u := range urls(out) {
		if !strings.HasPrefix(u, "https://github.com/nodeaddr/nodeaddr/blob/v9.8.7/docs/runbooks.md#") {
			t.Errorf("chart 9.8.7: runbook_url %s, want the tag v9.8.7", u)
		}
	}
}

// promtoolTestRules runs `promtool test rules` on unit, a test file naming rules.yaml, beside the
// PrometheusRule's groups written as rules.yaml.
func promtoolTestRules(t *testing.T, unit []byte) string {
	t.Helper()
	promtool := harness.Tool(t, "promtool", "prometheus")
	dir := t.TempDir()
	rules, err := yaml.Marshal(map[string]any{"groups": harness.ReadRules(t).Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "unit_test.yaml"), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	return harness.Run(t, "", promtool, "test", "rules", filepath.Join(dir, "unit_test.yaml"))
}

// NodeaddrDown is one alert over the fleet, as the mixins' TargetDown: in a fleet of 200 agents one
// down (a node being drained, a stuck pod) never fires it, at any time; 40 down (a scrape-auth
// break, a bad rollout) fire it once, for the fleet, with the fraction, not 40 times.
func TestDownAlertIsAFleetRatio(t *testing.T) {
	const fleet = 200
	series := func(down int) string {
		var b strings.Builder
		for i := range fleet {
			values := "1x60"
			if i < down {
				values = "1 1 1 0x57"
			}
			fmt.Fprintf(&b, "      - series: 'up{job=\"nodeaddr\",namespace=\"kube-system\",pod=\"nodeaddr-%03d\",node=\"n%03d\",instance=\"10.0.%d.%d:9810\"}'\n        values: '%s'\n",
				i, i, i/250, i%250+1, values)
		}
		return b.String()
	}
	none := func(at ...string) string {
		var b strings.Builder
		for _, e := range at {
			fmt.Fprintf(&b, "      - eval_time: %s\n        alertname: NodeaddrDown\n        exp_alerts: []\n", e)
		}
		return b.String()
	}
	unit := "rule_files:\n  - rules.yaml\nevaluation_interval: 1m\ntests:\n" +
		"  # 1 of 200 agents down from minute 3 on: 0.5%, never an alert.\n" +
		"  - interval: 1m\n    input_series:\n" + series(1) +
		"    alert_rule_test:\n" + none("10m", "30m", "59m") +
		"  # 40 of 200 down from minute 3 on: 20%, pending until 18, then one alert for the fleet.\n" +
		"  - interval: 1m\n    input_series:\n" + series(40) +
		"    alert_rule_test:\n" + none("10m") +
		"      - eval_time: 30m\n        alertname: NodeaddrDown\n        exp_alerts:\n" +
		"          - exp_labels: {severity: warning, job: nodeaddr, namespace: kube-system}\n" +
		"            exp_annotations:\n" +
		"              summary: \"More than 10% of the nodeaddr agents are down\"\n" +
		"              description: \"Prometheus has failed to scrape 20% of the nodeaddr agents in kube-system for 15 minutes. The Nodes of those agents keep their addresses but follow no change. The down targets: up{job=\\\"nodeaddr\\\"} == 0.\"\n" +
		"              runbook_url: \"" + runbookURL(t, "NodeaddrDown") + "\"\n"
	t.Logf("promtool test rules:\n%s", promtoolTestRules(t, []byte(unit)))
}

// runbookURL is the runbook_url of alert in deploy/monitoring/prometheusrule.yaml.
func runbookURL(t *testing.T, alert string) string {
	t.Helper()
	for _, g := range harness.ReadRules(t).Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == alert {
				return r.Annotations["runbook_url"]
			}
		}
	}
	t.Fatalf("no alert %s", alert)
	return ""
}

var jobSelectorRE = regexp.MustCompile(`\bjob\s*=~?\s*"([^"]*)"`)

// scrapedJob is the job Prometheus gives the pods of a render that the ServiceMonitor name selects:
// its jobLabel read on the Service of the same name.
func scrapedJob(t *testing.T, objs map[string]harness.Object, name string) string {
	t.Helper()
	sm, ok := objs["ServiceMonitor/kube-system/"+name]
	if !ok {
		t.Fatalf("no ServiceMonitor %s", name)
	}
	svc, ok := objs["Service/kube-system/"+name]
	if !ok {
		t.Fatalf("no Service %s", name)
	}
	jobLabel, _ := sm["spec"].(harness.Object)["jobLabel"].(string)
	labels := svc["metadata"].(harness.Object)["labels"].(harness.Object)
	if jobLabel == "" || labels[jobLabel] == nil {
		t.Fatalf("ServiceMonitor jobLabel %q is not a label of the Service (%v)", jobLabel, labels)
	}
	return fmt.Sprint(labels[jobLabel])
}

// The alerts select the job the ServiceMonitor gives the agents, in the kustomize base and in the
// chart, also when nameOverride or fullnameOverride rename it; the alerts on the approver's metrics
// (testdata/metrics-approval.golden, not in metrics.golden) select the job its ServiceMonitor
// (NAME-approver) gives the approver.
func TestRulesSelectTheScrapedJob(t *testing.T) {
	harness.RequireE2E(t)
	agentMetrics, err := os.ReadFile(goldenMetrics)
	if err != nil {
		t.Fatal(err)
	}
	approverMetrics, err := os.ReadFile(filepath.Join("testdata", "metrics-approval.golden"))
	if err != nil {
		t.Fatal(err)
	}
	conflictsMetrics, err := os.ReadFile(filepath.Join("testdata", "metrics-conflicts.golden"))
	if err != nil {
		t.Fatal(err)
	}
	only := func(golden []byte) func(expr string) bool {
		return func(expr string) bool {
			for _, m := range harness.MetricRE.FindAllString(expr, -1) {
				if strings.Contains(string(golden), "# TYPE "+m+" ") && !strings.Contains(string(agentMetrics), "# TYPE "+m+" ") {
					return true
				}
			}
			return false
		}
	}
	onlyApprover, onlyConflicts := only(approverMetrics), only(conflictsMetrics)
	check := func(what string, objs map[string]harness.Object, name string) {
		t.Helper()
		job, approverJob, conflictsJob := scrapedJob(t, objs, name), scrapedJob(t, objs, name+"-approver"), scrapedJob(t, objs, name+"-conflicts")
		remediatorJob := scrapedJob(t, objs, name+"-remediator")
		pr, ok := objs["PrometheusRule/kube-system/"+name]
		if !ok {
			t.Fatalf("%s: no PrometheusRule %s", what, name)
		}
		y, err := yaml.Marshal(pr)
		if err != nil {
			t.Fatal(err)
		}
		var rules harness.PrometheusRule
		if err := yaml.Unmarshal(y, &rules); err != nil {
			t.Fatal(err)
		}
		n, approverRules := 0, 0
		for _, g := range rules.Spec.Groups {
			for _, r := range g.Rules {
				want := job
				if onlyApprover(r.Expr) {
					want = approverJob
					approverRules++
				}
				if onlyConflicts(r.Expr) {
					want = conflictsJob
				}
				if strings.Contains(r.Expr, "nodeaddr_remediation_") {
					want = remediatorJob // the remediator's metrics (docs/metrics.md)
				}
				for _, m := range jobSelectorRE.FindAllStringSubmatch(r.Expr, -1) {
					n++
					if m[1] != want {
						t.Errorf("%s: %s selects %s, the ServiceMonitor scrapes job %q", what, r.Alert, m[0], want)
					}
				}
			}
		}
		if n < 5 || approverRules == 0 {
			t.Fatalf("%s: only %d job selectors in the rules, %d rules on the approver", what, n, approverRules)
		}
	}
	check("kustomize", harness.DecodeDocs(t, harness.Kustomize(t, harness.DeployFile(), harness.DeployFile("monitoring"))), "nodeaddr")
	check("helm", harness.DecodeDocs(t, harness.HelmTemplate(t, "--set", "monitoring.enabled=true")), "nodeaddr")
	renamed := harness.DecodeDocs(t, harness.HelmTemplate(t, "--set", "monitoring.enabled=true", "--set", "nameOverride=na"))
	if job := scrapedJob(t, renamed, "nodeaddr-na"); job != "na" {
		t.Errorf("nameOverride=na: the ServiceMonitor scrapes job %q, want na", job)
	}
	if job := scrapedJob(t, renamed, "nodeaddr-na-approver"); job != "na-approver" {
		t.Errorf("nameOverride=na: the approver's ServiceMonitor scrapes job %q, want na-approver", job)
	}
	if job := scrapedJob(t, renamed, "nodeaddr-na-conflicts"); job != "na-conflicts" {
		t.Errorf("nameOverride=na: the conflict detector's ServiceMonitor scrapes job %q, want na-conflicts", job)
	}
	check("helm nameOverride=na", renamed, "nodeaddr-na")
	check("helm fullnameOverride=addr", harness.DecodeDocs(t, harness.HelmTemplate(t, "--set", "monitoring.enabled=true", "--set", "fullnameOverride=addr")), "addr")
}
