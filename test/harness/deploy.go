// deploy/'s manifests as the test packages read them: its files, the chart and kustomize renders
// (decoded by kind/namespace/name), the container the kubelet would run from a render, and the
// shipped DaemonSet, clients with the agent's or another token.
package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// PolicyName is the ValidatingAdmissionPolicy (and binding) in deploy/admission-policy.yaml.
const PolicyName = "nodeaddr-own-node"

// DeployFile is the path of a file under deploy/.
func DeployFile(parts ...string) string {
	return filepath.Join(append([]string{RepoDir(), "deploy"}, parts...)...)
}

// ShippedDaemonSet decodes deploy/daemonset.yaml.
func ShippedDaemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	data, err := os.ReadFile(DeployFile("daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("daemonset.yaml: %d objects, want 1", len(objs))
	}
	ds, ok := objs[0].(*appsv1.DaemonSet)
	if !ok {
		t.Fatalf("daemonset.yaml holds a %T", objs[0])
	}
	return ds
}

// AgentClient is a client with the agent's pod-bound token for node (what the DaemonSet pod on that
// node would use).
func AgentClient(t *testing.T, cp *ControlPlane, node string) kubernetes.Interface {
	t.Helper()
	return TokenClient(t, cp, cp.AgentToken(t, node))
}

func TokenClient(t *testing.T, cp *ControlPlane, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{
		Host:            cp.Config.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// ChartDir is deploy/helm/nodeaddr.
func ChartDir() string { return DeployFile("helm", "nodeaddr") }

// HelmTemplate renders the chart as `helm install nodeaddr deploy/helm/nodeaddr -n kube-system`
// would, with extra arguments (--set ...).
func HelmTemplate(t *testing.T, extra ...string) string {
	t.Helper()
	out, err := HelmTemplateErr(t, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// HelmTemplateErr is HelmTemplate returning Helm's failure (with its stderr) instead of failing.
func HelmTemplateErr(t *testing.T, extra ...string) (string, error) {
	t.Helper()
	// --skip-tests: what `helm install` creates (the test hook is checked by test/deploy's helm_check_test.go).
	args := append(append([]string{"template", "nodeaddr", ChartDir(), "--namespace", "kube-system", "--skip-tests"}, ChosenImage(t)...), extra...)
	out, stderr, err := HelmRun(t, args...)
	if err != nil {
		return "", fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out, nil
}

// ChosenImage are the values that choose the image the kustomize base names (the default
// repository, tag appVersion) explicitly: a development version's chart refuses to render its
// never-published default image otherwise (TestHelmRefusesTheUnpublishedDefaultImage). Values
// after them override them.
func ChosenImage(t *testing.T) []string {
	t.Helper()
	return []string{"--set", "image.tag=" + ChartAppVersion(t)}
}

// HelmRun runs the helm CLI with args and returns its stdout and stderr.
func HelmRun(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	helm := MustBuildHelm(t)
	home := t.TempDir()
	cmd := exec.Command(helm, args...)
	cmd.Env = HelmEnv(home)
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	out, err := cmd.Output()
	return string(out), errBuf.String(), err
}

type Object = map[string]any

var clusterScoped = map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"FlowSchema": true, "PriorityLevelConfiguration": true}

// DecodeDocs splits multi-document YAML into objects keyed by kind/namespace/name.
func DecodeDocs(t *testing.T, data string) map[string]Object {
	t.Helper()
	out := map[string]Object{}
	for _, o := range DecodeYAMLDocs(t, data) {
		md, _ := o["metadata"].(Object)
		if clusterScoped[fmt.Sprint(o["kind"])] {
			// kustomize sets its namespace on kinds it does not know to be cluster-scoped
			// (ValidatingAdmissionPolicy, FlowSchema); the API server ignores it.
			delete(md, "namespace")
		}
		key := fmt.Sprintf("%v/%v/%v", o["kind"], md["namespace"], md["name"])
		if _, dup := out[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		out[key] = o
	}
	return out
}

func Kustomize(t *testing.T, dirs ...string) string {
	t.Helper()
	kubectl := MustBuild(t).Kubectl
	var parts []string
	for _, d := range dirs {
		parts = append(parts, Run(t, "", kubectl, "kustomize", d))
	}
	return strings.Join(parts, "---\n")
}

// CheckArgsParse runs the built binary once with args, in dry-run mode without ports, and fails on
// a usage error.
func CheckArgsParse(t *testing.T, args []string) {
	t.Helper()
	bin := MustBuild(t).Nodeaddr
	full := append(slices.Clone(args), "--run-once", "--dry-run", "--timeout=2s",
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Env = []string{"NODE_NAME=worker-1"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		t.Errorf("nodeaddr refuses the chart's arguments %v:\n%s", args, out)
	}
}

// RenderedArgs returns the args the agent of a render runs with: $(VAR) expanded from its env, as
// the kubelet does, with the render's ConfigMaps.
func RenderedArgs(t *testing.T, objs map[string]Object) []string {
	t.Helper()
	ds, ok := objs["DaemonSet/kube-system/nodeaddr"]
	if !ok {
		t.Fatalf("no DaemonSet in %v", slices.Collect(maps.Keys(objs)))
	}
	c, configMaps := RenderedContainer(t, ds, objs)
	_, args := PodEnv(t, c, "worker-1", configMaps)
	return args
}

// RenderedContainer is the nodeaddr container of a rendered DaemonSet ds, and the data of the
// rendered ConfigMaps in kube-system by name (what the kubelet resolves configMapKeyRef env from).
func RenderedContainer(t *testing.T, ds Object, objs map[string]Object) (corev1.Container, map[string]map[string]string) {
	t.Helper()
	raw, err := json.Marshal(ds["spec"].(Object)["template"].(Object)["spec"].(Object)["containers"].([]any)[0])
	if err != nil {
		t.Fatal(err)
	}
	var c corev1.Container
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	configMaps := map[string]map[string]string{}
	for key, o := range objs {
		if name, ok := strings.CutPrefix(key, "ConfigMap/kube-system/"); ok {
			data := map[string]string{}
			for k, v := range o["data"].(Object) {
				data[k] = v.(string)
			}
			configMaps[name] = data
		}
	}
	return c, configMaps
}

// ChartAppVersion is Chart.yaml's appVersion.
func ChartAppVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ChartDir(), "Chart.yaml"))
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

// PodEnv resolves the container's env as the kubelet would for a pod on node, with configMaps
// (name → data) in the pod's namespace, and expands $(VAR) in args the same way.
func PodEnv(t *testing.T, c corev1.Container, node string, configMaps map[string]map[string]string) (env []string, args []string) {
	t.Helper()
	vars := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			v = node
		case e.ValueFrom.ResourceFieldRef != nil:
			q := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(e.ValueFrom.ResourceFieldRef.Resource, "limits."))]
			div := e.ValueFrom.ResourceFieldRef.Divisor
			if div.IsZero() {
				div = resource.MustParse("1")
			}
			v = strconv.FormatInt(q.Value()/div.Value(), 10)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			data, ok := configMaps[ref.Name]
			if _, has := data[ref.Key]; (!ok || !has) && (ref.Optional == nil || !*ref.Optional) {
				t.Fatalf("env %s: ConfigMap %s has no key %s: the kubelet would not start the pod", e.Name, ref.Name, ref.Key)
			}
			v = data[ref.Key]
		default:
			t.Fatalf("env %s: source %+v not emulated by the test", e.Name, e.ValueFrom)
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, a := range c.Args {
		args = append(args, ref.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := vars[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		}))
	}
	return env, args
}

// WaitHTTP waits until GET :port/path of the agent answers 200.
func (a *Agent) WaitHTTP(t *testing.T, port int, path string) {
	t.Helper()
	Eventually(t, 30*time.Second, 50*time.Millisecond, fmt.Sprintf("GET :%d%s answers 200", port, path), func() (bool, string) {
		code, body, err := a.Get(port, path)
		return err == nil && code == 200, fmt.Sprintf("%d %q %v", code, body, err)
	})
}

// UseContainerPorts sets the agent's metrics and probe ports to the container's ports named metrics
// and probes, as the DaemonSet's (or the chart's) pod declares them.
func (a *Agent) UseContainerPorts(c corev1.Container) {
	for _, p := range c.Ports {
		switch p.Name {
		case "metrics":
			a.MetricsPort = int(p.ContainerPort)
		case "probes":
			a.ProbePort = int(p.ContainerPort)
		}
	}
}
