package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
		args := append([]string{"lint", "--strict", harness.ChartDir(), "--namespace", "kube-system"}, extra...)
		out, stderr, err := harness.HelmRun(t, args...)
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
			args := append([]string{"template", "nodeaddr", harness.ChartDir(), "--namespace", "kube-system"}, c.args...)
			out, stderr, err := harness.HelmRun(t, args...)
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
		harness.HelmTemplate(t, ok...)
	}
}

// values.schema.json is closed at every level the chart defines (additionalProperties: false
// wherever it lists properties), declares every key of values.yaml, and lists the log levels and
// formats the binary accepts.
func TestValuesSchemaIsClosed(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(harness.ChartDir(), "values.schema.json"))
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

	vb, err := os.ReadFile(filepath.Join(harness.ChartDir(), "values.yaml"))
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
	flags := harness.BinaryFlags(t)
	for _, level := range enum("config", "logLevel") {
		if level == "" {
			continue
		}
		harness.CheckArgsParse(t, []string{"--log-level=" + level, "--log-format=text", "--node-name=n"})
	}
	for _, format := range enum("config", "logFormat") {
		harness.CheckArgsParse(t, []string{"--log-format=" + format, "--node-name=n"})
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
	appVersion := harness.ChartAppVersion(t)

	podLabels := func(objs map[string]harness.Object, key string) harness.Object {
		t.Helper()
		ds, ok := objs[key]
		if !ok {
			t.Fatalf("no %s in the render", key)
		}
		return ds["spec"].(harness.Object)["template"].(harness.Object)["metadata"].(harness.Object)["labels"].(harness.Object)
	}
	def := harness.DecodeDocs(t, harness.HelmTemplate(t))
	labels := podLabels(def, "DaemonSet/kube-system/nodeaddr")
	for k, want := range map[string]string{
		"app.kubernetes.io/name": "nodeaddr", "app.kubernetes.io/instance": "nodeaddr",
		"app.kubernetes.io/version": appVersion, "app.kubernetes.io/managed-by": "Helm",
	} {
		if labels[k] != want {
			t.Errorf("pod template label %s = %v, want %q (labels %v)", k, labels[k], want, labels)
		}
	}

	full := harness.DecodeDocs(t, harness.HelmTemplate(t, "--set", "fullnameOverride=addr", "--set", "monitoring.enabled=true"))
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
	if args := harness.RenderedArgs(t, renameKeys(full, "addr")); !slices.Contains(args, "--node-name=worker-1") {
		t.Errorf("renamed render: args %v (the ConfigMap reference must follow the name)", args)
	}

	named := harness.DecodeDocs(t, harness.HelmTemplate(t, "--set", "nameOverride=na"))
	ds, ok := named["DaemonSet/kube-system/nodeaddr-na"]
	if !ok {
		t.Fatalf("nameOverride=na: no DaemonSet nodeaddr-na")
	}
	sel := ds["spec"].(harness.Object)["selector"].(harness.Object)["matchLabels"].(harness.Object)
	if sel["app.kubernetes.io/name"] != "na" || podLabels(named, "DaemonSet/kube-system/nodeaddr-na")["app.kubernetes.io/name"] != "na" {
		t.Errorf("nameOverride=na: selector %v and pod labels must use app.kubernetes.io/name=na", sel)
	}
}

// renameKeys returns objs with the DaemonSet named name filed as nodeaddr, the key
// harness.RenderedArgs looks up (the ConfigMaps keep their names: the DaemonSet refers to them).
func renameKeys(objs map[string]harness.Object, name string) map[string]harness.Object {
	out := map[string]harness.Object{}
	for k, v := range objs {
		if k == "DaemonSet/kube-system/"+name {
			k = "DaemonSet/kube-system/nodeaddr"
		}
		out[k] = v
	}
	return out
}
