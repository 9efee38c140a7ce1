package matrix

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The checks of one release, in the order they run; their names are the compatibility table's
// columns.
const (
	checkApply    = "kustomize base applies server-side"
	checkCompile  = "admission policies type-check (the release's own checker)"
	checkPolicy   = "policy table: every write allowed or denied as listed"
	checkAgent    = "agent publishes and removes the taint (1 write each), renumbering is 1 write"
	matrixTimeout = 30 * time.Second
)

var checks = []string{checkApply, checkCompile, checkPolicy, checkAgent}

func TestMatrix(t *testing.T) {
	harness.RequireE2E(t)
	var rows []row
	for _, v := range harness.MatrixVersions {
		r := row{Version: v, Results: map[string]bool{}}
		t.Run(v, func(t *testing.T) { r.Results = runRelease(t, v) })
		rows = append(rows, r)
	}
	checkTable(t, rows)
}

// runRelease runs every check against one kube-apiserver release and reports which passed.
func runRelease(t *testing.T, version string) map[string]bool {
	if err := harness.CheckLinks(harness.MustBuildAPIServer(t, version), version); err != nil {
		t.Fatal(err)
	}
	cp := harness.StartControlPlaneVersion(t, version)
	got := map[string]bool{}
	var rendered string
	var policies []string
	got[checkApply] = t.Run(checkApply, func(t *testing.T) { rendered, policies = applyBase(t, cp) })
	got[checkCompile] = t.Run(checkCompile, func(t *testing.T) { checkTypeChecking(t, version, rendered, policies) })
	got[checkPolicy] = t.Run(checkPolicy, func(t *testing.T) { checkPolicyTable(t, cp, version) })
	got[checkAgent] = t.Run(checkAgent, func(t *testing.T) { checkAgentWrites(t, cp) })
	// Not a column: a fact about the release, for policies that would use the IP library.
	t.Run("isIP() and cidr() accepted from 1.31", func(t *testing.T) { checkIPLibrary(t, cp, version) })
	return got
}

// applyBase renders deploy/ with kubectl kustomize and applies it server-side with the newest
// kubectl (the server decides what it accepts): every object applied, no warning. It returns the
// rendered manifests and the names of the ValidatingAdmissionPolicies applied.
func applyBase(t *testing.T, cp *harness.ControlPlane) (rendered string, policies []string) {
	bins := harness.MustBuild(t)
	kc := harness.Kubeconfig(t, t.TempDir(), cp.Config.Host, cp.AdminToken)
	rendered = run(t, "", bins.Kubectl, "kustomize", filepath.Join(harness.RepoDir(), "deploy"))
	out := run(t, rendered, bins.Kubectl, "--kubeconfig="+kc, "apply", "--server-side",
		"--field-manager=nodeaddr-install", "-f", "-")
	t.Logf("apply:\n%s", out)
	if strings.Contains(out, "Warning:") {
		t.Errorf("the API server warned about the manifests:\n%s", out)
	}
	objs, err := harness.DecodeManifests([]byte(rendered))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out, "serverside-applied"); got != len(objs) {
		t.Errorf("apply reported %d objects applied, rendered %d", got, len(objs))
	}
	for _, l := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(l, "validatingadmissionpolicy.admissionregistration.k8s.io/"); ok {
			policies = append(policies, strings.Fields(name)[0])
		}
	}
	if len(policies) == 0 {
		t.Fatalf("no ValidatingAdmissionPolicy applied:\n%s", out)
	}
	return rendered, policies
}

// checkTypeChecking type-checks the rendered policies with the type checker of the release's own
// kube-controller-manager (its policy status controller; the harness runs none). The only warnings
// allowed are "undefined field" for Node fields newer than the release (the policy guards them with
// `?.`; they cannot be set there); any other fails: an expression that does not type-check may
// never deny. That the server compiles every expression is proven by the apply (it rejects a
// policy it cannot compile).
func checkTypeChecking(t *testing.T, version, rendered string, policies []string) {
	if len(policies) == 0 {
		t.Fatal("no policies were applied")
	}
	out, stderr := typeCheck(t, version, rendered)
	if want := fmt.Sprintf("%d policies", len(policies)); !strings.Contains(stderr, want) {
		t.Errorf("vaptypecheck %s checked other policies than were applied (want %s): %s", version, want, stderr)
	}
	newer := newerNodeFields(t, version)
	var fields []string
	errs := errorRE.FindAllStringSubmatch(out, -1)
	for _, e := range errs {
		if path := newerField(e[1], e[2], newer); path != "" {
			fields = append(fields, path)
			continue
		}
		t.Errorf("type-check error on %s: %s\n in %s", version, e[1], e[2])
	}
	if len(errs) == 0 && strings.TrimSpace(out) != "" {
		t.Errorf("type-check warnings on %s:\n%s", version, out)
	}
	if len(fields) > 0 {
		slices.Sort(fields)
		t.Logf("%s: guarded Node fields newer than this release (type-check warnings, harmless): %v", version, slices.Compact(fields))
	}
}

var (
	// An error and the expression line that follows it.
	errorRE     = regexp.MustCompile(`ERROR: <input>:\d+:\d+: (.*)\n \| (.*)`)
	undefinedRE = regexp.MustCompile(`^undefined field '([A-Za-z0-9]+)'$`)
)

// newerField returns the Node path ("status.features") an "undefined field" error is about when
// the expression reaches it from object or oldObject and it is in newer, else "".
func newerField(msg, expr string, newer map[string]bool) string {
	m := undefinedRE.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	sel := regexp.MustCompile(`\b(?:object|oldObject)((?:\.\??[A-Za-z0-9]+)*?)\.\??` + m[1] + `\b`)
	for _, s := range sel.FindAllStringSubmatch(expr, -1) {
		path := strings.TrimPrefix(strings.ReplaceAll(s[1], "?", "")+"."+m[1], ".")
		if newer[path] {
			return path
		}
	}
	return ""
}

// typeCheck runs the release's vaptypecheck on rendered; it returns the warnings and the summary.
func typeCheck(t *testing.T, version, rendered string, args ...string) (warnings, summary string) {
	t.Helper()
	tc, err := harness.BuildTypeChecker(os.Stderr, version)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tc, args...)
	cmd.Stdin = strings.NewReader(rendered)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("vaptypecheck %s: %v\n%s", version, err, stderr.String())
	}
	return string(out), stderr.String()
}

// newerNodeFields returns the JSON paths of the newest release's Node fields that version's lacks.
func newerNodeFields(t *testing.T, version string) map[string]bool {
	t.Helper()
	old, _ := typeCheck(t, version, "", "-node-fields")
	newest, _ := typeCheck(t, harness.KubernetesVersion, "", "-node-fields")
	out := map[string]bool{}
	for _, f := range strings.Fields(newest) {
		out[f] = true
	}
	for _, f := range strings.Fields(old) {
		delete(out, f)
	}
	return out
}

// checkAgentWrites runs the real agent in a network namespace with the token of a pod on its
// Node, as the DaemonSet does, with ExternalIP from the route toward 8.8.8.8 (no packet is sent).
func checkAgentWrites(t *testing.T, cp *harness.ControlPlane) {
	const node = "matrix"
	cp.CreateNode(t, harness.NodeSpec{Name: node, Taints: []corev1.Taint{harness.Uninitialized},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node}}})
	h := harness.NewHostOn(t, cp, node)
	h.Uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	h.Start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	want := []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "192.0.2.10"}, {Type: corev1.NodeHostName, Address: node}}
	cp.WaitNode(t, node, matrixTimeout, "published and initialized", func(n *corev1.Node) bool {
		return slices.Equal(n.Status.Addresses, want) && !slices.Contains(harness.TaintKeys(n), harness.Uninitialized.Key)
	})
	if w := cp.Writes(t, node); w["status"] != 1 || w[""] != 1 {
		t.Fatalf("agent writes = %v, want one status write and one taint write", w)
	}
	// Make-before-break renumbering (secondaries are promoted).
	h.NS.IP("addr", "add", "192.0.2.20/24", "dev", "eth0")
	h.NS.IP("addr", "del", "192.0.2.10/24", "dev", "eth0")
	want[0].Address = "192.0.2.20"
	cp.WaitNode(t, node, matrixTimeout, "renumbered", func(n *corev1.Node) bool { return slices.Equal(n.Status.Addresses, want) })
	if w := cp.Writes(t, node); w["status"] != 2 {
		t.Fatalf("status writes after renumbering = %d, want 2", w["status"])
	}
}
