// deploy/'s renders compared and composed: the chart against the kustomize output in substance,
// the binary's flags from its --help, overlays of the base with components.
package harness

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// helmLabels are the labels the chart adds for Helm's bookkeeping; the kustomize base has none.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"}

// substance removes what may differ between the chart and the kustomize base without changing what
// the cluster runs: Helm's labels (on the objects and the pod templates) and config checksum, an imagePullPolicy equal to the API server's default, the order
// and spelling of the agent's flags (replaced by the effective configuration; the approver's are
// compared as they are) and trailing whitespace of ConfigMap data (a YAML block scalar's chomping).
func substance(t *testing.T, o Object, defaults map[string]string) Object {
	t.Helper()
	md := o["metadata"].(Object)
	if labels, ok := md["labels"].(Object); ok {
		for _, l := range helmLabels {
			delete(labels, l)
		}
	}
	if o["kind"] == "ConfigMap" {
		if data, ok := o["data"].(Object); ok {
			for k, v := range data {
				data[k] = strings.TrimRight(v.(string), "\n ")
			}
		}
	}
	if o["kind"] == "ValidatingAdmissionPolicy" {
		// CEL ignores whitespace; kustomize re-folds a block scalar with a more-indented line into
		// one with an extra blank line.
		o["spec"] = collapseSpace(o["spec"])
	}
	if o["kind"] != "DaemonSet" && o["kind"] != "Deployment" {
		return o
	}
	tmd := o["spec"].(Object)["template"].(Object)["metadata"].(Object)
	if labels, ok := tmd["labels"].(Object); ok {
		for _, l := range helmLabels {
			delete(labels, l)
		}
	}
	if ann, ok := tmd["annotations"].(Object); ok {
		delete(ann, "checksum/config") // Helm's way to restart the pods when the ConfigMap changes
		if len(ann) == 0 {
			delete(tmd, "annotations")
		}
	}
	pod := o["spec"].(Object)["template"].(Object)["spec"].(Object)
	for _, c := range pod["containers"].([]any) {
		c := c.(Object)
		image, _ := c["image"].(string)
		if c["imagePullPolicy"] == "IfNotPresent" && !strings.HasSuffix(image, ":latest") && strings.Contains(image, ":") {
			delete(c, "imagePullPolicy")
		}
		if o["kind"] == "Deployment" {
			continue // the approver's flags are not the agent's: compared as they are
		}
		var args []string
		for _, a := range c["args"].([]any) {
			args = append(args, a.(string))
		}
		c["args"] = effectiveFlags(t, defaults, args)
	}
	return o
}

// collapseSpace replaces each run of whitespace in every string of v with one space.
func collapseSpace(v any) any {
	switch v := v.(type) {
	case string:
		return strings.Join(strings.Fields(v), " ")
	case []any:
		for i := range v {
			v[i] = collapseSpace(v[i])
		}
	case Object:
		for k := range v {
			v[k] = collapseSpace(v[k])
		}
	}
	return v
}

// effectiveFlags is the configuration the binary runs with: its defaults, overridden by args
// (--reconcile-interval folded into --resync-interval), values normalized (60s == 1m0s).
func effectiveFlags(t *testing.T, defaults map[string]string, args []string) map[string]any {
	t.Helper()
	eff := map[string]any{}
	for k, v := range defaults {
		eff[k] = normalize(v)
	}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok {
			value = "true" // a bare boolean flag
		}
		if _, known := defaults[name]; !known || !strings.HasPrefix(a, "-") {
			t.Errorf("argument %q is not a flag of nodeaddr", a)
			continue
		}
		if name == "reconcile-interval" {
			name = "resync-interval"
		}
		eff[name] = normalize(value)
	}
	delete(eff, "reconcile-interval")
	return eff
}

func normalize(v string) string {
	if d, err := time.ParseDuration(v); err == nil {
		return d.String()
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return v
}

// helpFlagRE is a flag line of pflag's --help ("      --name type   usage", "  -v, --v int   usage";
// booleans have no type); longer-indented lines continue the usage.
var helpFlagRE = regexp.MustCompile(`^(?:  -\w, |      )--([a-z0-9-]+)(?: (\w+))?\s{2,}(.*)$`)

var helpDefaultRE = regexp.MustCompile(`\(default (.*)\)$`)

// hiddenFlags are flags --help does not show because pflag hides deprecated ones, with their
// default: BinaryFlags checks the binary still accepts them.
var hiddenFlags = map[string]string{"reconcile-interval": "0s", "approve-kubelet-serving-csr": "false"}

// BinaryFlags parses `nodeaddr --help` of the built binary: each flag with its default value ("" or
// "false" when the usage prints none), plus hiddenFlags.
func BinaryFlags(t *testing.T) map[string]string {
	t.Helper()
	bin := MustBuild(t).Nodeaddr
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("nodeaddr --help: %v\n%s", err, out)
	}
	flags := map[string]string{}
	usage := map[string]string{}
	types := map[string]string{}
	var cur string
	for _, line := range strings.Split(string(out), "\n") {
		if m := helpFlagRE.FindStringSubmatch(line); m != nil {
			cur = m[1]
			types[cur], usage[cur] = m[2], m[3]
			continue
		}
		if cur != "" && strings.HasPrefix(line, "          ") {
			usage[cur] += " " + strings.TrimSpace(line)
		} else {
			cur = ""
		}
	}
	for name, u := range usage {
		flags[name] = ""
		if types[name] == "" { // boolean
			flags[name] = "false"
		}
		if m := helpDefaultRE.FindStringSubmatch(strings.TrimSpace(u)); m != nil {
			v := m[1]
			if types[name] == "string" {
				if u, err := strconv.Unquote(v); err == nil {
					v = u
				}
			}
			flags[name] = v
		}
	}
	if len(flags) < 20 {
		t.Fatalf("parsed only %d flags from nodeaddr --help:\n%s", len(flags), out)
	}
	for name, def := range hiddenFlags {
		if _, shown := flags[name]; shown {
			t.Errorf("--%s is shown by --help: remove it from hiddenFlags", name)
		}
		if out, err := exec.Command(bin, "--"+name+"="+def, "--version").CombinedOutput(); err != nil {
			t.Errorf("nodeaddr --%s=%s --version: %v\n%s", name, def, err, out)
		}
		flags[name] = def
	}
	return flags
}

// CompareRenders checks that the chart and the kustomize output hold the same objects, equal in
// substance.
func CompareRenders(t *testing.T, chart, kustomized string) {
	t.Helper()
	defaults := BinaryFlags(t)
	h, k := DecodeDocs(t, chart), DecodeDocs(t, kustomized)
	hk, kk := slices.Sorted(maps.Keys(h)), slices.Sorted(maps.Keys(k))
	if !slices.Equal(hk, kk) {
		t.Fatalf("objects differ:\n helm:      %v\n kustomize: %v", hk, kk)
	}
	same := true
	for _, key := range kk {
		ho, ko := substance(t, h[key], defaults), substance(t, k[key], defaults)
		if !reflect.DeepEqual(ho, ko) {
			same = false
			hy, _ := yaml.Marshal(ho)
			ky, _ := yaml.Marshal(ko)
			t.Errorf("%s differs in substance:\n--- helm\n%s\n--- kustomize\n%s", key, hy, ky)
		}
	}
	if same {
		t.Logf("helm and kustomize agree on %d objects: %v", len(kk), kk)
	}
}

func DefaultArgs(t *testing.T) []string { return ArgsWith(t) }

// ArgsWith renders the chart with --set for each of sets and returns the agent's args.
func ArgsWith(t *testing.T, sets ...string) []string {
	t.Helper()
	var extra []string
	for _, s := range sets {
		extra = append(extra, "--set", s)
	}
	return RenderedArgs(t, DecodeDocs(t, HelmTemplate(t, extra...)))
}

// RenderKustomization writes kustomization (naming this repository's deploy/ ../nodeaddr/deploy,
// as docs/customize.md does) into a temporary directory and returns `kubectl kustomize` of it.
func RenderKustomization(t *testing.T, kustomization string) string {
	t.Helper()
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, DeployFile())
	if err != nil {
		t.Fatal(err)
	}
	k := strings.ReplaceAll(kustomization, "../nodeaddr/deploy", rel)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return Run(t, "", MustBuild(t).Kubectl, "kustomize", dir)
}

// KubectlFor returns a kubectl bound to cp as the administrator.
func KubectlFor(t *testing.T, cp *ControlPlane) func(stdin string, args ...string) string {
	t.Helper()
	kc := Kubeconfig(t, t.TempDir(), cp.Config.Host, cp.AdminToken)
	kubectl := MustBuild(t).Kubectl
	return func(stdin string, args ...string) string {
		t.Helper()
		return Run(t, stdin, kubectl, append([]string{"--kubeconfig=" + kc}, args...)...)
	}
}

// ComponentOverlay renders the base with the components named (under deploy/components).
func ComponentOverlay(t *testing.T, components ...string) string {
	t.Helper()
	dir := t.TempDir()
	rel := func(parts ...string) string {
		r, err := filepath.Rel(dir, DeployFile(parts...))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel() + "\ncomponents:\n"
	for _, c := range components {
		k += "  - " + rel("components", c) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return Run(t, "", MustBuild(t).Kubectl, "kustomize", dir)
}
