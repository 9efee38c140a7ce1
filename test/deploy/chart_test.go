package deploy

import (
	"encoding/json"
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

// `helm lint --strict` passes with the default values and with monitoring on (warnings fail too).
func TestHelmLintStrict(t *testing.T) {
	harness.RequireE2E(t)
	for _, extra := range [][]string{nil, {"--set", "monitoring.enabled=true"}} {
		args := append([]string{"lint", "--strict", chartDir(), "--namespace", "kube-system"}, extra...)
		out, stderr, err := helmRun(t, args...)
		if err != nil || !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
	}
}

// The chart refuses values it does not know, at the top level and below, the removed one-shot
// values, and log levels and formats outside their lists; the error names the value.
func TestHelmRefusesUnknownValues(t *testing.T) {
	harness.RequireE2E(t)
	typo := filepath.Join(t.TempDir(), "typo.yaml")
	if err := os.WriteFile(typo, []byte("config:\n  logLvel: debug\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string // in helm's error
	}{
		{"unknown top-level key", []string{"--set", "replicas=2"}, "replicas"},
		{"misspelt key from a values file", []string{"-f", typo}, "logLvel"},
		{"unknown nested key", []string{"--set", "monitoring.serviceMonitor.intervall=1m"}, "intervall"},
		{"removed one-shot value runOnce", []string{"--set", "config.runOnce=true"}, "runOnce"},
		{"removed one-shot value dryRun", []string{"--set", "config.dryRun=true"}, "dryRun"},
		{"removed one-shot value version", []string{"--set", "config.version=true"}, "version"},
		{"log level outside the list", []string{"--set", "config.logLevel=verbose"}, "logLevel"},
		{"log format outside the list", []string{"--set", "config.logFormat=yaml"}, "logFormat"},
		{"rate that is not positive", []string{"--set", "config.publishRate=0"}, "publishRate"},
		{"duration that is no duration", []string{"--set", "config.debounce=fast"}, "debounce"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"template", "nodeaddr", chartDir(), "--namespace", "kube-system"}, c.args...)
			out, stderr, err := helmRun(t, args...)
			if err == nil {
				t.Fatalf("helm %s succeeded; want the schema to refuse it:\n%.300s", strings.Join(args, " "), out)
			}
			if !strings.Contains(stderr, "schema") || !strings.Contains(stderr, c.want) {
				t.Errorf("helm %s: the error does not name the schema and %q:\n%s", strings.Join(args, " "), c.want, stderr)
			}
		})
	}
	// The values that are accepted still render (the schema is not simply refusing everything).
	for _, ok := range [][]string{
		{"--set", "config.logLevel=debug", "--set", "config.logFormat=text"},
		{"--set", "config.logLevel=", "--set", "config.v=3"},
		{"--set", "config.metricsBindAddress=0", "--set", "config.reconcileInterval=10s"},
		{"--set", "nameOverride=na", "--set", "fullnameOverride=addr"},
	} {
		helmTemplate(t, ok...)
	}
}

// values.schema.json is closed at every level the chart defines (additionalProperties: false
// wherever it lists properties), declares every key of values.yaml, and lists the log levels and
// formats the binary accepts.
func TestValuesSchemaIsClosed(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir(), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	var walk func(path string, node map[string]any)
	walk = func(path string, node map[string]any) {
		props, ok := node["properties"].(map[string]any)
		if !ok {
			return
		}
		if node["additionalProperties"] != false {
			t.Errorf("schema %s: properties listed but additionalProperties is %v, want false", path, node["additionalProperties"])
		}
		for k, v := range props {
			if sub, ok := v.(map[string]any); ok {
				walk(path+"."+k, sub)
			}
		}
	}
	walk("(root)", schema)

	vb, err := os.ReadFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(vb, &values); err != nil {
		t.Fatal(err)
	}
	// Every key of values.yaml down to the objects the schema closes is declared.
	var declared func(path string, v any, node map[string]any)
	declared = func(path string, v any, node map[string]any) {
		m, ok := v.(map[string]any)
		props, closed := node["properties"].(map[string]any)
		if !ok || !closed {
			return
		}
		for k, sub := range m {
			p, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("values.yaml %s.%s is not declared in values.schema.json", path, k)
				continue
			}
			declared(path+"."+k, sub, p)
		}
	}
	declared("", values, schema)

	enum := func(path ...string) []string {
		node := schema
		for _, p := range path {
			node = node["properties"].(map[string]any)[p].(map[string]any)
		}
		var out []string
		for _, e := range node["enum"].([]any) {
			out = append(out, fmt.Sprint(e))
		}
		slices.Sort(out)
		return out
	}
	if got := enum("config", "logLevel"); !slices.Equal(got, []string{"", "debug", "error", "info", "warn"}) {
		t.Errorf("config.logLevel enum %q", got)
	}
	if got := enum("config", "logFormat"); !slices.Equal(got, []string{"json", "text"}) {
		t.Errorf("config.logFormat enum %q", got)
	}
	// Every log level and format in the schema is one the binary accepts.
	flags := binaryFlags(t)
	for _, level := range enum("config", "logLevel") {
		if level == "" {
			continue
		}
		checkArgsParse(t, []string{"--log-level=" + level, "--log-format=text", "--node-name=n"})
	}
	for _, format := range enum("config", "logFormat") {
		checkArgsParse(t, []string{"--log-format=" + format, "--node-name=n"})
	}
	if _, ok := flags["log-level"]; !ok {
		t.Errorf("the binary has no --log-level")
	}
}

// The pod template carries the standard app.kubernetes.io labels; nameOverride and fullnameOverride
// rename every object, and what refers to them (ServiceAccount, ConfigMap, the policy's user and
// parameter) follows.
func TestHelmNamesAndLabels(t *testing.T) {
	harness.RequireE2E(t)
	appVersion := chartAppVersion(t)

	podLabels := func(objs map[string]object, key string) object {
		t.Helper()
		ds, ok := objs[key]
		if !ok {
			t.Fatalf("no %s in the render", key)
		}
		return ds["spec"].(object)["template"].(object)["metadata"].(object)["labels"].(object)
	}
	def := decodeDocs(t, helmTemplate(t))
	labels := podLabels(def, "DaemonSet/kube-system/nodeaddr")
	for k, want := range map[string]string{
		"app.kubernetes.io/name": "nodeaddr", "app.kubernetes.io/instance": "nodeaddr",
		"app.kubernetes.io/version": appVersion, "app.kubernetes.io/managed-by": "Helm",
	} {
		if labels[k] != want {
			t.Errorf("pod template label %s = %v, want %q (labels %v)", k, labels[k], want, labels)
		}
	}

	full := decodeDocs(t, helmTemplate(t, "--set", "fullnameOverride=addr", "--set", "monitoring.enabled=true"))
	for _, key := range []string{"DaemonSet/kube-system/addr", "ServiceAccount/kube-system/addr", "ConfigMap/kube-system/addr",
		"ClusterRole/<nil>/addr", "ClusterRoleBinding/<nil>/addr", "ValidatingAdmissionPolicy/<nil>/addr-own-node",
		"ValidatingAdmissionPolicyBinding/<nil>/addr-own-node", "Service/kube-system/addr", "ServiceMonitor/kube-system/addr",
		"PrometheusRule/kube-system/addr", "ConfigMap/kube-system/addr-dashboard", "FlowSchema/<nil>/addr",
		"PriorityLevelConfiguration/<nil>/addr", "ServiceAccount/kube-system/addr-approver",
		"Service/kube-system/addr-approver", "ServiceMonitor/kube-system/addr-approver"} {
		if _, ok := full[key]; !ok {
			t.Errorf("fullnameOverride=addr: no %s in %v", key, slices.Sorted(func(yield func(string) bool) {
				for k := range full {
					if !yield(k) {
						return
					}
				}
			}))
		}
	}
	// The policy carries the agent's username in parts (kustomize replaces the namespace and name).
	if y, _ := json.Marshal(full["ValidatingAdmissionPolicy/<nil>/addr-own-node"]); !strings.Contains(string(y), "'system:serviceaccount:' + 'kube-system' + ':' + 'addr'") {
		t.Errorf("the policy does not name the renamed ServiceAccount:\n%s", y)
	}
	if y, _ := yaml.Marshal(full["ValidatingAdmissionPolicyBinding/<nil>/addr-own-node"]); !strings.Contains(string(y), "policyName: addr-own-node\n") {
		t.Errorf("the policy binding does not name the renamed policy:\n%s", y)
	}
	if args := renderedArgs(t, renameKeys(full, "addr")); !slices.Contains(args, "--node-name=worker-1") {
		t.Errorf("renamed render: args %v (the ConfigMap reference must follow the name)", args)
	}

	named := decodeDocs(t, helmTemplate(t, "--set", "nameOverride=na"))
	ds, ok := named["DaemonSet/kube-system/nodeaddr-na"]
	if !ok {
		t.Fatalf("nameOverride=na: no DaemonSet nodeaddr-na")
	}
	sel := ds["spec"].(object)["selector"].(object)["matchLabels"].(object)
	if sel["app.kubernetes.io/name"] != "na" || podLabels(named, "DaemonSet/kube-system/nodeaddr-na")["app.kubernetes.io/name"] != "na" {
		t.Errorf("nameOverride=na: selector %v and pod labels must use app.kubernetes.io/name=na", sel)
	}
}

// renameKeys returns objs with the DaemonSet named name filed as nodeaddr, the key renderedArgs
// looks up (the ConfigMaps keep their names: the DaemonSet refers to them).
func renameKeys(objs map[string]object, name string) map[string]object {
	out := map[string]object{}
	for k, v := range objs {
		if k == "DaemonSet/kube-system/"+name {
			k = "DaemonSet/kube-system/nodeaddr"
		}
		out[k] = v
	}
	return out
}

// chartAppVersion is Chart.yaml's appVersion.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.AppVersion
}

var jobSelectorRE = regexp.MustCompile(`\bjob\s*=~?\s*"([^"]*)"`)

// scrapedJob is the job Prometheus gives the pods of a render that the ServiceMonitor name selects:
// its jobLabel read on the Service of the same name.
func scrapedJob(t *testing.T, objs map[string]object, name string) string {
	t.Helper()
	sm, ok := objs["ServiceMonitor/kube-system/"+name]
	if !ok {
		t.Fatalf("no ServiceMonitor %s", name)
	}
	svc, ok := objs["Service/kube-system/"+name]
	if !ok {
		t.Fatalf("no Service %s", name)
	}
	jobLabel, _ := sm["spec"].(object)["jobLabel"].(string)
	labels := svc["metadata"].(object)["labels"].(object)
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
			for _, m := range metricRE.FindAllString(expr, -1) {
				if strings.Contains(string(golden), "# TYPE "+m+" ") && !strings.Contains(string(agentMetrics), "# TYPE "+m+" ") {
					return true
				}
			}
			return false
		}
	}
	onlyApprover, onlyConflicts := only(approverMetrics), only(conflictsMetrics)
	check := func(what string, objs map[string]object, name string) {
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
		var rules prometheusRule
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
	check("kustomize", decodeDocs(t, kustomize(t, deployFile(), deployFile("monitoring"))), "nodeaddr")
	check("helm", decodeDocs(t, helmTemplate(t, "--set", "monitoring.enabled=true")), "nodeaddr")
	renamed := decodeDocs(t, helmTemplate(t, "--set", "monitoring.enabled=true", "--set", "nameOverride=na"))
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
	check("helm fullnameOverride=addr", decodeDocs(t, helmTemplate(t, "--set", "monitoring.enabled=true", "--set", "fullnameOverride=addr")), "addr")
}
