package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// prometheusRule is the part of deploy/monitoring/prometheusrule.yaml the tests read.
type prometheusRule struct {
	Spec struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []struct {
		Alert       string            `json:"alert,omitempty"`
		Record      string            `json:"record,omitempty"`
		Expr        string            `json:"expr"`
		For         string            `json:"for,omitempty"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"rules"`
}

func readRules(t *testing.T) prometheusRule {
	t.Helper()
	data, err := os.ReadFile(deployFile("monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatal(err)
	}
	if len(pr.Spec.Groups) == 0 {
		t.Fatal("prometheusrule.yaml has no rule groups")
	}
	return pr
}

var metricRE = regexp.MustCompile(`\b(?:nodeaddr|process|go)_[a-z0-9_]+\b`)

// ruleMetrics lists the metrics the alerts read (other than Prometheus's own up).
func ruleMetrics(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, g := range readRules(t).Spec.Groups {
		for _, r := range g.Rules {
			out = append(out, metricRE.FindAllString(r.Expr, -1)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// baseRuleMetrics are the ruleMetrics every agent exposes: without those only the approver
// exposes (testdata/metrics-approval.golden, the approver's families, scraped by test/csr; those
// also in metrics.golden, such as nodeaddr_build_info, are the agent's too).
func baseRuleMetrics(t *testing.T) []string {
	t.Helper()
	approval, err := os.ReadFile(filepath.Join("testdata", "metrics-approval.golden"))
	if err != nil {
		t.Fatal(err)
	}
	agent, err := os.ReadFile(goldenMetrics)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(ruleMetrics(t), func(name string) bool {
		return strings.Contains(string(approval), "# TYPE "+name+" ") && !strings.Contains(string(agent), "# TYPE "+name+" ")
	})
}

// The PrometheusRule's groups pass `promtool check rules`; `promtool test rules` (testdata/
// alerts_test.yaml) fires and resolves every alert; every alert has a runbook section.
func TestAlertRules(t *testing.T) {
	promtool := harness.Tool(t, "promtool", "prometheus")
	pr := readRules(t)
	dir := t.TempDir()
	rules, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "", promtool, "check", "rules", filepath.Join(dir, "rules.yaml"))

	unit, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, "", promtool, "test", "rules", filepath.Join(dir, "alerts_test.yaml"))
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
			if !strings.HasSuffix(r.Annotations["runbook_url"], "/docs/runbooks.md#"+anchor) {
				t.Errorf("%s: runbook_url %q does not point to docs/runbooks.md#%s", r.Alert, r.Annotations["runbook_url"], anchor)
			}
			if !strings.Contains(string(runbooks), "\n## "+r.Alert+"\n") {
				t.Errorf("%s: docs/runbooks.md has no section \"## %s\"", r.Alert, r.Alert)
			}
		}
	}
}
