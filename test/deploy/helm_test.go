package deploy

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The chart's default output is the kustomize base: same objects, same DaemonSet (args compared
// as the configuration the binary ends up with), same RBAC rules, same admission policy.
func TestHelmDefaultMatchesKustomize(t *testing.T) {
	harness.RequireE2E(t)
	harness.CompareRenders(t, harness.HelmTemplate(t), harness.Kustomize(t, harness.DeployFile()))
}

// With monitoring on, the chart adds what deploy/monitoring/ holds: the headless Service, the
// ServiceMonitor, the PrometheusRule and the Grafana dashboard ConfigMap.
func TestHelmMonitoringMatchesKustomize(t *testing.T) {
	harness.RequireE2E(t)
	harness.CompareRenders(t, harness.HelmTemplate(t, "--set", "monitoring.enabled=true"), harness.Kustomize(t, harness.DeployFile(), harness.DeployFile("monitoring")))
	// The chart cannot read files outside itself: its copies must stay equal to deploy/monitoring's.
	a, err := os.ReadFile(harness.DeployFile("monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(harness.ChartDir(), "files", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("deploy/helm/nodeaddr/files/dashboard.json differs from deploy/monitoring/dashboard.json: copy it")
	}
}

// The switches of the chart: policy off, API server override, image, tolerations, the deprecated
// and conditional flags.
func TestHelmValues(t *testing.T) {
	harness.RequireE2E(t)
	objs := harness.DecodeDocs(t, harness.HelmTemplate(t,
		"--set", "admissionPolicy.enabled=false", "--set", "rbac.create=false",
		"--set", "apiServer.host=10.0.0.10", "--set", "apiServer.port=6443",
		"--set", "image.repository=mirror/nodeaddr", "--set", "image.tag=v9.9.9", "--set", "image.pullPolicy=Always",
		"--set", "config.reconcileInterval=10s", "--set", "config.v=2",
		"--set", "config.internalIPTarget=10.0.0.1", "--set", "config.publishRate=0.5", "--set", "config.netlinkReceiveBuffer=16777216",
		"--set", "tolerations=null", "--set", "priorityClassName=",
		"--set", "config.metricsBindAddress=:19810", "--set", "config.annotations=k3s\\,calico"))
	for key := range objs {
		if strings.HasPrefix(key, "ValidatingAdmissionPolicy") {
			t.Errorf("admissionPolicy.enabled=false still renders %s", key)
		}
	}
	ds, ok := objs["DaemonSet/kube-system/nodeaddr"]
	if !ok {
		t.Fatalf("no DaemonSet in %v", slices.Collect(maps.Keys(objs)))
	}
	pod := ds["spec"].(harness.Object)["template"].(harness.Object)["spec"].(harness.Object)
	c := pod["containers"].([]any)[0].(harness.Object)
	if c["image"] != "mirror/nodeaddr:v9.9.9" || c["imagePullPolicy"] != "Always" {
		t.Errorf("image %v, pull policy %v", c["image"], c["imagePullPolicy"])
	}
	if _, ok := pod["tolerations"]; ok {
		t.Errorf("tolerations=null still renders tolerations")
	}
	if _, ok := pod["priorityClassName"]; ok {
		t.Errorf("priorityClassName= still renders priorityClassName")
	}
	env := map[string]any{}
	for _, e := range c["env"].([]any) {
		env[e.(harness.Object)["name"].(string)] = e.(harness.Object)["value"]
	}
	if env["KUBERNETES_SERVICE_HOST"] != "10.0.0.10" || env["KUBERNETES_SERVICE_PORT"] != "6443" {
		t.Errorf("API server override: env %v", env)
	}
	if cm := objs["ConfigMap/kube-system/nodeaddr"]; cm == nil || cm["data"].(harness.Object)["annotations"] != "k3s,calico" {
		t.Errorf("config.annotations=k3s,calico: ConfigMap %v", cm)
	}
	args := harness.RenderedArgs(t, objs)
	for _, want := range []string{"--reconcile-interval=10s", "--v=2", "--internal-ip-target=10.0.0.1", "--annotations=k3s,calico",
		"--publish-rate=0.5", "--netlink-receive-buffer=16777216", "--metrics-bind-address=:19810"} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %s: %v", want, args)
		}
	}
	for _, a := range args {
		// --resync-interval: the binary refuses it beside its alias. --log-level: config.v alone
		// must set the level (the chart's default logLevel is empty), as --log-level would win.
		if strings.HasPrefix(a, "--resync-interval=") || strings.HasPrefix(a, "--log-level=") {
			t.Errorf("%s rendered beside config.v or its alias", a)
		}
	}
	if ports := fmt.Sprint(c["ports"]); !strings.Contains(ports, "containerPort:19810") {
		t.Errorf("metrics container port does not follow config.metricsBindAddress: %s", ports)
	}
	// The binary accepts what the chart renders (exit 2 is a usage error).
	harness.CheckArgsParse(t, args)
}

// Every flag of the binary has a value in the chart, is passed by the DaemonSet template, and is
// documented in docs/configuration.md's flags table and in docs/install-helm.md's Helm values table.
func TestEveryFlagInChartAndDocs(t *testing.T) {
	harness.RequireE2E(t)
	flags := harness.BinaryFlags(t)
	valuesData, err := os.ReadFile(filepath.Join(harness.ChartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Config map[string]any `json:"config"`
	}
	if err := yaml.Unmarshal(valuesData, &values); err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join(harness.ChartDir(), "templates", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	configMapTmpl, err := os.ReadFile(filepath.Join(harness.ChartDir(), "templates", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	configDoc, err := os.ReadFile(filepath.Join(harness.RepoDir(), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	install, err := os.ReadFile(filepath.Join(harness.RepoDir(), "docs", "install-helm.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, flagsSection, _ := strings.Cut(string(configDoc), "\n## Flags\n")
	flagsSection, _, _ = strings.Cut(flagsSection, "\n## ")
	var tableRows []string
	for _, l := range strings.Split(flagsSection, "\n") {
		if strings.HasPrefix(l, "| `--") {
			tableRows = append(tableRows, l)
		}
	}
	rendered := harness.DefaultArgs(t)
	// Flags rendered only when their value is set: the aliases, the log level (empty, so that
	// config.v alone sets it: --log-level would win), and the targets, whose empty value means the
	// binary's default anyway.
	conditional := map[string]string{"reconcile-interval": "config.reconcileInterval=10s", "v": "config.v=1",
		"log-level":          "config.logLevel=debug",
		"internal-ip-target": "config.internalIPTarget=none", "external-ip-target": "config.externalIPTarget=192.0.2.1"}
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		key := valueKey(name)
		if oneShotFlags[name] {
			// No value and never rendered: a DaemonSet pod that exits is restarted forever.
			if _, ok := values.Config[key]; ok {
				t.Errorf("--%s is a one-shot flag: values.yaml must not have config.%s", name, key)
			}
			if slices.ContainsFunc(rendered, func(a string) bool { return strings.HasPrefix(a, "--"+name+"=") || a == "--"+name }) {
				t.Errorf("--%s is a one-shot flag: the chart must not render it", name)
			}
			if !slices.ContainsFunc(tableRows, func(r string) bool { return strings.Contains(r, "`--"+name+"`") }) {
				t.Errorf("--%s: not in docs/configuration.md's flags table", name)
			}
			continue
		}
		if _, ok := values.Config[key]; !ok {
			t.Errorf("--%s: no config.%s in deploy/helm/nodeaddr/values.yaml", name, key)
		}
		if alias, ok := switchFlags[name]; ok {
			// A switch of the chart: the flag is never rendered, its value renders the alias.
			for _, set := range []string{"", "config." + key + "=true"} {
				var args []string
				if set == "" {
					args = rendered
				} else {
					args = harness.ArgsWith(t, set)
				}
				if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--"+name) }) {
					t.Errorf("--%s is rendered (--set %s): the chart renders --%s instead", name, set, alias)
				}
				if want := fmt.Sprintf("--%s=%t", alias, set != ""); !slices.Contains(args, want) {
					t.Errorf("--set %s: args lack %s: %v", set, want, args)
				}
			}
		} else if env, ok := configMapFlags[name]; ok {
			// Through the ConfigMap (annotations: which the admission policy reads too).
			if !bytes.Contains(tmpl, []byte(`"--`+name+`=$(`+env+`)"`)) || !bytes.Contains(configMapTmpl, []byte("$c."+key)) {
				t.Errorf("--%s: not rendered from config.%s through templates/configmap.yaml", name, key)
			}
		} else if !bytes.Contains(tmpl, []byte(`"--`+name+`=`)) || !bytes.Contains(tmpl, []byte("$c."+key)) {
			t.Errorf("--%s: templates/daemonset.yaml does not render it from config.%s", name, key)
		}
		if _, ok := switchFlags[name]; ok {
			// Checked above.
		} else if set, ok := conditional[name]; ok {
			if !slices.ContainsFunc(harness.ArgsWith(t, set), func(a string) bool { return strings.HasPrefix(a, "--"+name+"=") }) {
				t.Errorf("--%s: not rendered with --set %s", name, set)
			}
		} else if !slices.ContainsFunc(rendered, func(a string) bool { return strings.HasPrefix(a, "--"+name+"=") }) {
			t.Errorf("--%s: not in the default render's args", name)
		}
		if !slices.ContainsFunc(tableRows, func(r string) bool { return strings.Contains(r, "`--"+name+"`") }) {
			t.Errorf("--%s: not in docs/configuration.md's flags table", name)
		}
		if !strings.Contains(string(install), "`config."+key+"`") {
			t.Errorf("--%s: docs/install-helm.md's Helm values table lacks `config.%s`", name, key)
		}
	}
	for key := range values.Config {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(flags)), func(f string) bool { return valueKey(f) == key }) {
			t.Errorf("values.yaml config.%s is no flag of nodeaddr", key)
		}
	}
	harness.CheckArgsParse(t, rendered)
}

// switchFlags are deprecated flags whose chart value is a switch of the chart, with the flag the
// chart renders instead: config.approveKubeletServingCsr installs the approver and renders
// --approval-record=true (--approve-kubelet-serving-csr means the same to the binary).
var switchFlags = map[string]string{"approve-kubelet-serving-csr": "approval-record"}

// configMapFlags reach the agent through the ConfigMap, as $(ENV) in its args.
var configMapFlags = map[string]string{"annotations": "NODEADDR_ANNOTATIONS", "metrics-allowed-scrapers": "NODEADDR_METRICS_ALLOWED_SCRAPERS"}

// oneShotFlags make the agent exit (or only matter when it does): the chart has no value for them.
var oneShotFlags = map[string]bool{"run-once": true, "dry-run": true, "version": true, "timeout": true,
	"check-install": true, "check-namespace": true, "check-agent-selector": true, "check-node-selector": true,
	"explain": true, "output": true}

// valueKey is the chart's name for a flag: camelCase, with IP and CIDR in capitals
// (--internal-ip-cidrs: internalIPCIDRs).
func valueKey(flag string) string {
	parts := strings.Split(flag, "-")
	for i, p := range parts {
		switch {
		case i == 0:
		case p == "ip":
			parts[i] = "IP"
		case p == "cidr":
			parts[i] = "CIDR"
		case p == "cidrs":
			parts[i] = "CIDRs"
		default:
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

// The chart's output (monitoring on) applies with a server-side dry run and then for real on the
// API server, and an upgrade re-applies cleanly.
func TestHelmAppliesOnAPIServer(t *testing.T) {
	harness.RequireE2E(t)
	rendered := harness.HelmTemplate(t, "--set", "monitoring.enabled=true")
	cp, k := harness.ApplyToAPIServer(t, harness.MustBuild(t).Kubectl, rendered, "helm")
	ctx := context.Background()
	cm, err := cp.Admin.CoreV1().ConfigMaps("kube-system").Get(ctx, "nodeaddr-dashboard", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels["grafana_dashboard"] != "1" || !strings.Contains(cm.Data["nodeaddr.json"], `"uid": "nodeaddr"`) {
		t.Errorf("dashboard ConfigMap: labels %v, %d bytes of JSON", cm.Labels, len(cm.Data["nodeaddr.json"]))
	}
	for _, r := range []string{"servicemonitor/nodeaddr", "prometheusrule/nodeaddr", "service/nodeaddr"} {
		k("", "-n", "kube-system", "get", r)
	}
	k(rendered, "apply", "--server-side", "--field-manager=helm", "-f", "-")
}

// Values that would silently widen the agents' privileges are refused at render time, with a
// message naming the value; the defaults render.
func TestHelmRefusesWideningValues(t *testing.T) {
	harness.RequireE2E(t)
	for _, c := range []struct {
		name string
		set  []string
		why  string
	}{
		{"policy off, RBAC on", []string{"admissionPolicy.enabled=false"}, "admissionPolicy.enabled=false with rbac.create=true"},
		{"preexisting ServiceAccount", []string{"serviceAccount.create=false", "serviceAccount.name=nodeaddr"}, "serviceAccount.create=false"},
		{"shared default ServiceAccount", []string{"serviceAccount.name=default"}, "serviceAccount.name=default"},
		{"securityContext null", []string{"securityContext=null"}, "securityContext is empty"},
		// The schema refuses a non-object before the template's own check.
		{"securityContext empty", []string{"securityContext="}, "securityContext"},
		{"podSecurityContext null", []string{"podSecurityContext=null"}, "podSecurityContext is empty"},
		{"privileged container", []string{"securityContext.privileged=true"}, "neither privileged nor allowPrivilegeEscalation"},
		{"privilege escalation", []string{"securityContext.allowPrivilegeEscalation=true"}, "neither privileged nor allowPrivilegeEscalation"},
		{"a quote in config.annotations", []string{"config.annotations=k3s' || true || '"}, "config.annotations"},
	} {
		var args []string
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		_, err := harness.HelmTemplateErr(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s (--set %s): got %v, want a refusal saying %q", c.name, strings.Join(c.set, " --set "), err, c.why)
		}
	}
	// Turning both off is the operator granting the rights themselves: allowed.
	if _, err := harness.HelmTemplateErr(t, "--set", "admissionPolicy.enabled=false", "--set", "rbac.create=false"); err != nil {
		t.Errorf("policy and RBAC both off: %v", err)
	}
}

// config.annotations renders into the chart's ConfigMap and policy what docs/customize.md's overlay
// that patches the ConfigMap renders with kustomize.
func TestHelmAnnotationsMatchKustomizeOverlay(t *testing.T) {
	harness.RequireE2E(t)
	const spec = "k3s,calico,example.com/node-ip=internal-ipv4"
	overlay := harness.RenderKustomization(t, annotationsOverlay(t, spec))
	harness.CompareRenders(t, harness.HelmTemplate(t, "--set", "config.annotations="+strings.ReplaceAll(spec, ",", `\,`)), overlay)
}
