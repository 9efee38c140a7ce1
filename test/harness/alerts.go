// The alert rules of deploy/monitoring/prometheusrule.yaml and the metrics they read.
package harness

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// PrometheusRule is the part of deploy/monitoring/prometheusrule.yaml the tests read.
type PrometheusRule struct {
	Spec struct {
		Groups []RuleGroup `json:"groups"`
	} `json:"spec"`
}

type RuleGroup struct {
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

func ReadRules(t *testing.T) PrometheusRule {
	t.Helper()
	data, err := os.ReadFile(DeployFile("monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr PrometheusRule
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatal(err)
	}
	if len(pr.Spec.Groups) == 0 {
		t.Fatal("prometheusrule.yaml has no rule groups")
	}
	return pr
}

var MetricRE = regexp.MustCompile(`\b(?:nodeaddr|process|go)_[a-z0-9_]+\b`)

// RuleMetrics lists the metrics the alerts read (other than Prometheus's own up).
func RuleMetrics(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, g := range ReadRules(t).Spec.Groups {
		for _, r := range g.Rules {
			out = append(out, MetricRE.FindAllString(r.Expr, -1)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// BaseRuleMetrics are the RuleMetrics every agent exposes: without those only the approver
// exposes (testdata/metrics-approval.golden, the approver's families, scraped by test/csr; those
// also in metrics.golden, such as nodeaddr_build_info, are the agent's too).
func BaseRuleMetrics(t *testing.T) []string {
	t.Helper()
	approval, err := os.ReadFile(MetricsGolden("metrics-approval.golden"))
	if err != nil {
		t.Fatal(err)
	}
	// The conflict detector's and the remediator's families (test/conflicts and test/remediation
	// scrape them), as the approver's.
	for _, f := range []string{"metrics-conflicts.golden", "metrics-remediation.golden"} {
		b, err := os.ReadFile(MetricsGolden(f))
		if err != nil {
			t.Fatal(err)
		}
		approval = append(approval, b...)
	}
	agent, err := os.ReadFile(MetricsGolden("metrics.golden"))
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(RuleMetrics(t), func(name string) bool {
		return strings.Contains(string(approval), "# TYPE "+name+" ") && !strings.Contains(string(agent), "# TYPE "+name+" ")
	})
}

// MetricsGolden is the path of test/alerts/testdata/name: the metric families of the agent
// (metrics.golden, written by test/deploy's TestAgentRunsAsTheDaemonSetDoes) and of each
// cluster-side command (metrics-approval.golden, metrics-conflicts.golden,
// metrics-remediation.golden, written by test/csr, test/conflicts and test/remediation), which
// test/alerts checks the rules and the dashboard against.
func MetricsGolden(name string) string {
	return filepath.Join(TestModuleDir(), "alerts", "testdata", name)
}
