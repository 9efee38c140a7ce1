// Package plugin runs the real kubectl-nodeaddr binary against a real kube-apiserver: Nodes,
// hostNetwork pods that kept their old address, an EndpointSlice, a pending kubelet-serving CSR and
// loopback stand-ins for the kubelets' serving ports.
package plugin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/internal/inspect"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

var update = flag.Bool("update", false, "rewrite testdata/status.golden from this run")

// cluster is the scene: node-a was renumbered from 127.0.0.12 to 127.0.0.2 (its agent kept the old
// pod IP, its kubelet serves a certificate for the old address and has filed a CSR for the new one,
// which the approver's rules refuse: a loopback address); node-b is current; node-c is tainted with
// no address and no agent; node-d's kubelet port is closed and its agent not ready; node-e was
// renumbered from 198.51.100.12 to 198.51.100.2, which its agent recorded for the approver, its
// kubelet filed a CSR for it, and its ingress controller, behind an EndpointSlice, kept the old
// address (EndpointSlices refuse loopback addresses, so node-e has documentation addresses and
// reports no kubelet port: nothing is sent).
type cluster struct {
	cp         *harness.ControlPlane
	kubeconfig string
	plugin     string
	kubectl    string
	kubeletA   *kubelet
	portA      int32
	portD      int
}

func setup(t *testing.T) *cluster {
	bins := harness.MustBuild(t)
	c := &cluster{cp: harness.StartControlPlane(t), plugin: harness.MustBuildPlugin(t), kubectl: bins.Kubectl}
	cs := c.cp.Admin
	c.kubeconfig = harness.Kubeconfig(t, t.TempDir(), c.cp.Config.Host, c.cp.AdminToken)
	c.kubeletA = startKubelet(t, "127.0.0.2", "127.0.0.12")
	c.portA = c.kubeletA.port()
	kubeletB := startKubelet(t, "127.0.0.3", "127.0.0.3")
	var err error
	if c.portD, err = harness.FreePort(); err != nil { // nothing listens there
		t.Fatal(err)
	}
	a := node(t, c.cp, "node-a", c.portA, vocab.FieldManager, nil, "127.0.0.2")
	node(t, c.cp, "node-b", kubeletB.port(), "kubelet", nil, "127.0.0.3")
	nc := node(t, c.cp, "node-c", 10250, "", []corev1.Taint{harness.Uninitialized})
	node(t, c.cp, "node-d", int32(c.portD), vocab.FieldManager, nil, "127.0.0.4")
	node(t, c.cp, "node-e", 0, vocab.FieldManager, nil, "198.51.100.2")
	record(t, cs, "node-e", "198.51.100.2")

	namespaces(t, cs, "kube-system", "ingress")
	agent := map[string]string{"app.kubernetes.io/name": "nodeaddr"}
	hostPod(t, cs, "kube-system", "nodeaddr-a", "node-a", "127.0.0.12", agent, true, 2)
	hostPod(t, cs, "kube-system", "nodeaddr-b", "node-b", "127.0.0.3", agent, true, 0)
	hostPod(t, cs, "kube-system", "nodeaddr-d", "node-d", "127.0.0.4", agent, false, 5)
	hostPod(t, cs, "kube-system", "nodeaddr-e", "node-e", "198.51.100.2", agent, true, 0)
	hostPod(t, cs, "ingress", "ingress-ctrl-e", "node-e", "198.51.100.12", nil, true, 0)
	endpointSlice(t, cs, "ingress", "ingress-http", [2]string{"ingress-ctrl-e", "198.51.100.12"}, [2]string{"web-0", "198.51.100.9"})
	servingCSR(t, c.cp, "csr-node-a", "node-a", "127.0.0.2")
	servingCSR(t, c.cp, "csr-node-e", "node-e", "198.51.100.2")
	warning(t, cs, a, vocab.ReasonAddressesOverwritten, "status.addresses reverted by kubelet")
	warning(t, cs, nc, vocab.ReasonProvidedNodeIPNotFound, "10.9.9.9 is not an address of this host")
	return c
}

// run runs the plugin binary with the cluster's kubeconfig and returns stdout, stderr and the exit code.
func (c *cluster) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(c.plugin, append(args, "--kubeconfig", c.kubeconfig)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("kubectl-nodeaddr %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// fields splits a table into rows of cells (columns are separated by two spaces or more).
func fields(out string) [][]string {
	var rows [][]string
	sep := regexp.MustCompile(`\s{2,}`)
	pending := regexp.MustCompile(`pending \d+[smhd]`)
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, sep.Split(pending.ReplaceAllString(line, "pending <age>"), -1))
	}
	return rows
}

func TestStale(t *testing.T) {
	c := setup(t)
	// The CSRs' fixes are the approver's verdict: node-a's names a loopback address, node-e's what
	// its agent recorded. Without a CSR to approve, node-a's kubelet must file a new one.
	restart := "on node node-a: restart the kubelet (it files a new kubelet-serving CSR)"
	deny, approve := "kubectl certificate deny csr-node-a", "kubectl certificate approve csr-node-e"
	want := [][]string{
		{"NODE", "NAMESPACE", "OBJECT", "WHERE", "ADDRESS", "FIX"},
		{"node-a", "kube-system", "pod/nodeaddr-a", "status.podIPs", "127.0.0.12", "kubectl -n kube-system delete pod nodeaddr-a"},
		{"node-a", "-", "node/node-a", fmt.Sprintf("kubelet serving certificate at 127.0.0.2:%d: IP SANs lack 127.0.0.2", c.portA), "127.0.0.12", restart},
		{"node-a", "-", "csr/csr-node-a", "spec.request IP SANs, pending <age>, refused (IPNotRoutable): IP 127.0.0.2 is unspecified, loopback, link-local or multicast",
			"127.0.0.2", deny},
		{"node-d", "-", "node/node-d", fmt.Sprintf("kubelet serving certificate at 127.0.0.4:%d (connect: connection refused)", c.portD), "unknown", "-"},
		{"node-e", "ingress", "pod/ingress-ctrl-e", "status.podIPs", "198.51.100.12", "kubectl -n ingress delete pod ingress-ctrl-e"},
		{"node-e", "ingress", "endpointslice/ingress-http", "endpoints[0].addresses (pod ingress-ctrl-e)", "198.51.100.12", "kubectl -n ingress delete pod ingress-ctrl-e"},
		{"node-e", "-", "csr/csr-node-e", "spec.request IP SANs, pending <age>", "198.51.100.2", approve},
	}
	unknown := want[4]
	// One line per run of stale on the scene before the fixes, each a thing only the real API
	// server shows: the objects as it lists and filters them (the approver's facts among them), its
	// errors as kubectl prints them, its RBAC. The printers (-o name, jsonpath, custom-columns) and
	// a named Node with nothing stale are cmd/kubectl-nodeaddr's TestOutputFormats, TestNameOutput
	// and TestExitCodes.
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		rows   [][]string // stdout's rows; nil: no stdout
		stderr string
	}{
		// --pending-after=0s: a CSR's age cannot be backdated, so the test lowers the threshold.
		{"every finding, the CSRs' fixes from the approver's facts", []string{"stale", "--pending-after=0s"}, 1, want, ""},
		{"the default --pending-after (5m): the CSRs not yet", []string{"stale"}, 1, slices.Delete(slices.Delete(slices.Clone(want), 7, 8), 3, 4), ""},
		// What the plugin cannot read is exit 3 (cannot tell), never 1 (stale).
		{"a Node named that does not exist", []string{"stale", "node-x"}, 3, nil, "Error from server (NotFound): nodes \"node-x\" not found\n"},
		{"a user without the right to list Nodes (RBAC)", []string{"stale", "--as=nobody"}, 3, nil,
			`Error from server (Forbidden): nodes is forbidden: User "nobody" cannot list resource "nodes" in API group "" at the cluster scope` + "\n"},
	} {
		stdout, stderr, code := c.run(t, tc.args...)
		var got [][]string
		if stdout != "" {
			got = fields(stdout)
		}
		if code != tc.code || !slices.EqualFunc(got, tc.rows, slices.Equal) || stderr != tc.stderr {
			t.Errorf("%s: %q: exit %d (want %d), stderr %q (want %q)\n%s\nwant rows %q", tc.name, tc.args, code, tc.code, stderr, tc.stderr, stdout, tc.rows)
		}
		t.Logf("kubectl-nodeaddr %s (exit %d):\n%s", strings.Join(tc.args, " "), code, stdout)
	}
	if t.Failed() {
		t.FailNow() // the watch and the fixes start from these findings
	}

	// -o json: the same findings, as a stable structure.
	stdout, _, code := c.run(t, "stale", "--pending-after=0s", "-o", "json")
	var l struct {
		Kind  string            `json:"kind"`
		Items []inspect.Finding `json:"items"`
	}
	if err := json.Unmarshal([]byte(stdout), &l); err != nil || code != 1 || l.Kind != "StaleList" || len(l.Items) != 7 ||
		l.Items[3] != (inspect.Finding{Kind: "node", Name: "node-d", Node: "node-d", Where: unknown[3], Address: "unknown", State: "unknown", Fix: "-"}) {
		t.Errorf("stale -o json: exit %d, %v\n%s", code, err, stdout)
	}

	watch := c.startWatch(t)
	watch.expect(t, "6 stale")
	c.fix(t, stdout)
	watch.expect(t, "0 stale")
	if code := watch.stop(t); code != 0 {
		t.Errorf("stale --watch exited %d after nothing was stale, want 0", code)
	}

	stdout, stderr, code := c.run(t, "stale", "--pending-after=0s")
	if got := fields(stdout); code != 0 || !slices.EqualFunc(got, [][]string{want[0], unknown}, slices.Equal) {
		t.Errorf("after the fixes: exit %d (want 0: an unknown kubelet is not stale), stderr %q\n%s", code, stderr, stdout)
	}
	t.Logf("after the fixes (exit %d):\n%s", code, stdout)

	// The gate docs/plugin.md and --help give, through kubectl: it ends, with 0.
	if code, out := c.gate(t, c.kubeconfig); code != 0 {
		t.Errorf("the documented gate ended with %d, want 0:\n%s", code, out)
	}
}

// gateLine is the script line docs/plugin.md gives to wait until nothing is stale; stale's --help
// gives the same.
func gateLine(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(harness.RepoDir(), "docs", "plugin.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^until kubectl nodeaddr stale .*; done`).FindString(string(doc))
	if m == "" {
		t.Fatal("docs/plugin.md gives no `until kubectl nodeaddr stale …; done` line")
	}
	return m
}

// gate runs the documented gate with kubectl, the plugin on PATH and KUBECONFIG=kubeconfig, and
// returns its exit code and output; it fails the test if the gate is still waiting after 60 s.
func (c *cluster) gate(t *testing.T, kubeconfig string) (int, string) {
	t.Helper()
	line := gateLine(t)
	help, _, _ := c.run(t, "stale", "--help")
	if !strings.Contains(help, "\n  "+line+"\n") {
		t.Errorf("stale --help does not give the gate of docs/plugin.md, %q:\n%s", line, help)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig,
		"PATH="+filepath.Dir(c.plugin)+":"+filepath.Dir(c.kubectl)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the gate %q still waits after 60 s:\n%s", line, out)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// TestCannotTell: without a cluster to read, the built binary exits 3, never 1 (stale), so that the
// documented gate, run by bash through kubectl, stops at once instead of waiting forever: an API
// server that refuses the connection, a KUBECONFIG naming no file. That every command exits 3 on
// each such error, with kubectl's messages (no fallback to localhost:8080), is
// cmd/kubectl-nodeaddr's TestExitCodes and TestMissingKubeconfig; a line here is what the process
// itself shows.
func TestCannotTell(t *testing.T) {
	c := &cluster{plugin: harness.MustBuildPlugin(t), kubectl: harness.MustBuild(t).Kubectl}
	port, err := harness.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	unreachable := harness.Kubeconfig(t, t.TempDir(), fmt.Sprintf("https://127.0.0.1:%d", port), "token")
	refused := fmt.Sprintf("127.0.0.1:%d: connect: connection refused\n", port)
	for _, tc := range []struct {
		env    string
		args   []string
		stderr string // its end
	}{
		{unreachable, []string{"stale"}, refused}, // the process's exit status, from main
	} {
		cmd := exec.Command(c.plugin, tc.args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+tc.env)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != 3 || stdout.Len() != 0 || !strings.HasSuffix(stderr.String(), tc.stderr) {
			t.Errorf("KUBECONFIG=%s kubectl-nodeaddr %q: exit %d (want 3), stdout %q, stderr %q (want it to end with %q)",
				tc.env, tc.args, code, stdout.String(), stderr.String(), tc.stderr)
		}
	}
	for _, kubeconfig := range []string{unreachable, "/nonexistent"} {
		if code, out := c.gate(t, kubeconfig); code != 3 {
			t.Errorf("KUBECONFIG=%s: the documented gate ended with %d, want 3:\n%s", kubeconfig, code, out)
		}
	}
}

// fix runs each finding's kubectl command with the real kubectl, then does what the rest of a
// cluster would: the kubelet finishes the pod deletions, the DaemonSet and Deployment controllers
// start new pods (with the Node's new address), the EndpointSlice controller follows them, and
// node-a's kubelet, restarted, serves a certificate for its new address.
func (c *cluster) fix(t *testing.T, staleJSON string) {
	t.Helper()
	var l struct {
		Items []inspect.Finding `json:"items"`
	}
	if err := json.Unmarshal([]byte(staleJSON), &l); err != nil {
		t.Fatal(err)
	}
	var done []string
	for _, f := range l.Items {
		if !strings.HasPrefix(f.Fix, "kubectl ") || slices.Contains(done, f.Fix) {
			continue
		}
		done = append(done, f.Fix)
		args := append(strings.Fields(f.Fix)[1:], "--kubeconfig", c.kubeconfig)
		if strings.Contains(f.Fix, " delete pod ") {
			args = append(args, "--wait=false") // no kubelet here to finish the deletion
		}
		harness.Run(t, "", c.kubectl, args...)
	}
	if !slices.Equal(done, []string{"kubectl -n kube-system delete pod nodeaddr-a", "kubectl certificate deny csr-node-a",
		"kubectl -n ingress delete pod ingress-ctrl-e", "kubectl certificate approve csr-node-e"}) {
		t.Fatalf("fix commands %q", done)
	}
	ctx := context.Background()
	cs := c.cp.Admin
	for _, p := range [][2]string{{"ingress", "ingress-ctrl-e"}, {"kube-system", "nodeaddr-a"}} {
		if err := cs.CoreV1().Pods(p[0]).Delete(ctx, p[1], metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	hostPod(t, cs, "kube-system", "nodeaddr-a2", "node-a", "127.0.0.2", map[string]string{"app.kubernetes.io/name": "nodeaddr"}, true, 0)
	hostPod(t, cs, "ingress", "ingress-ctrl-e2", "node-e", "198.51.100.2", nil, true, 0)
	s, err := cs.DiscoveryV1().EndpointSlices("ingress").Get(ctx, "ingress-http", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Endpoints[0].Addresses = []string{"198.51.100.2"}
	s.Endpoints[0].TargetRef.Name = "ingress-ctrl-e2"
	if _, err := cs.DiscoveryV1().EndpointSlices("ingress").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.kubeletA.serve(t, "127.0.0.2")
}

// watcher is a running `kubectl nodeaddr stale --watch`, its stderr summary lines in a channel.
type watcher struct {
	cmd    *exec.Cmd
	lines  chan string
	stdout *bytes.Buffer
}

func (c *cluster) startWatch(t *testing.T) *watcher {
	t.Helper()
	w := &watcher{cmd: exec.Command(c.plugin, "stale", "--watch", "--pending-after=0s", "--kubeconfig", c.kubeconfig),
		lines: make(chan string, 100), stdout: &bytes.Buffer{}}
	w.cmd.Stdout = w.stdout
	stderr, err := w.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	return w
}

// expect waits for the summary line ending in want ("<time>: N stale"), skipping intermediate ones.
func (w *watcher) expect(t *testing.T, want string) {
	t.Helper()
	// Lines as they stream, not a poll: each summary line is read once.
	timeout := time.After(60 * time.Second)
	var seen []string
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				t.Fatalf("stale --watch ended; lines %q", seen)
			}
			seen = append(seen, l)
			if strings.HasSuffix(l, ": "+want) {
				return
			}
		case <-timeout:
			t.Fatalf("stale --watch: no %q within 60s; lines %q\n%s", want, seen, w.stdout)
		}
	}
}

// stop interrupts the watch as Ctrl-C would and returns its exit code.
func (w *watcher) stop(t *testing.T) int {
	t.Helper()
	w.cmd.Process.Signal(syscall.SIGINT)
	err := w.cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return w.cmd.ProcessState.ExitCode()
}

// TestStatus compares `kubectl nodeaddr status` with testdata/status.golden, the ages masked; checks
// -o json and -o wide against the Node's managedFields and its Warning Event, -n against the API
// server's namespaced pod list, -v=6 on the process's stderr; and runs the plugin through kubectl's
// own plugin lookup. The printers on the same columns (-o name, jsonpath, go-template,
// custom-columns) and --version are cmd/kubectl-nodeaddr's TestOutputFormats and TestVerbosity
// (the built binary's version: TestInstallFromCheckout).
func TestStatus(t *testing.T) {
	c := setup(t)
	stdout, stderr, code := c.run(t, "status")
	if code != 0 {
		t.Fatalf("status: exit %d, %s", code, stderr)
	}
	got := maskAges(stdout)
	golden := filepath.Join("testdata", "status.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("status:\n%s\nwant (testdata/status.golden, -update rewrites it):\n%s", got, want)
	}
	t.Logf("kubectl nodeaddr status:\n%s", stdout)

	stdout, _, code = c.run(t, "status", "node-a", "-o", "json")
	var l struct {
		Items []inspect.NodeStatus `json:"items"`
	}
	if err := json.Unmarshal([]byte(stdout), &l); err != nil || code != 0 || len(l.Items) != 1 {
		t.Fatalf("status -o json: exit %d, %v\n%s", code, err, stdout)
	}
	var written *metav1.Time
	for _, mf := range c.cp.Node(t, "node-a").ManagedFields {
		if mf.Manager == vocab.FieldManager && mf.Subresource == "status" {
			written = mf.Time
		}
	}
	s := l.Items[0]
	if written == nil || s.LastWrite == nil || !s.LastWrite.Equal(written) || len(s.Writers) != 1 || s.Writers[0].Kind != inspect.WriterNodeaddr ||
		s.Agent == nil || *s.Agent != (inspect.AgentPod{Namespace: "kube-system", Name: "nodeaddr-a", Ready: true, Restarts: 2, Version: "0.1.0"}) ||
		s.LastWarning == nil || s.LastWarning.Reason != vocab.ReasonAddressesOverwritten || len(s.Attention) != 0 {
		t.Errorf("status -o json: %s\nnodeaddr's status write in managedFields: %v", stdout, written)
	}

	// -o wide: every column in full (the agent pod's name, its readiness and restarts, the Warning's message, no conflict).
	stdout, _, code = c.run(t, "status", "-o", "wide", "node-a", "node-c")
	wideRows := fields(stdout)
	if code != 0 || len(wideRows) != 3 || len(wideRows[1]) != 13 || wideRows[1][12] != "-" ||
		strings.Join(wideRows[0], " ") != " NODE INTERNAL-IP EXTERNAL-IP WRITERS WRITTEN TAINT AGENT READY RESTARTS VERSION WARNING CONFLICT" ||
		!slices.Equal(wideRows[1][:5], []string{"", "node-a", "127.0.0.2", "<none>", "nodeaddr"}) ||
		!slices.Equal(wideRows[1][6:11], []string{"no", "kube-system/nodeaddr-a", "yes", "2", "0.1.0"}) ||
		!regexp.MustCompile(`^AddressesOverwritten \(\d+s ago, x1\): status.addresses reverted by kubelet$`).MatchString(wideRows[1][11]) ||
		wideRows[1][5] != written.UTC().Format(time.RFC3339) {
		t.Errorf("status -o wide: exit %d, rows %q\n%s", code, wideRows, stdout)
	}
	t.Logf("kubectl nodeaddr status -o wide node-a node-c:\n%s", stdout)

	// -n narrows the agent search: no agent in the ingress namespace.
	stdout, _, _ = c.run(t, "status", "node-b", "-n", "ingress", "--no-headers")
	if !strings.HasPrefix(stdout, "!  node-b") || !strings.Contains(stdout, "<none>") {
		t.Errorf("status -n ingress:\n%s", stdout)
	}

	// -v=6, as kubectl's: the process's client-go logs each request on its stderr (TestVerbosity
	// reads klog's output in the test's process, not the binary's stderr).
	stdout, stderr, code = c.run(t, "status", "node-a", "-v=6")
	if code != 0 || !regexp.MustCompile(`\] "Response" verb="GET" url="`+regexp.QuoteMeta(c.cp.Config.Host)+`/api/v1/nodes/node-a" status="200 OK" milliseconds=\d+\n`).MatchString(stderr) ||
		!strings.Contains(stdout, "node-a") {
		t.Errorf("status node-a -v=6: exit %d, stderr:\n%s", code, stderr)
	}

	// kubectl finds the plugin on PATH.
	cmd := exec.Command(c.kubectl, "nodeaddr", "status", "--kubeconfig", c.kubeconfig)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(c.plugin)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil || maskAges(string(out)) != string(want) {
		t.Errorf("kubectl nodeaddr status: %v\n%s", err, out)
	}
}

// maskAges replaces the WRITTEN column's ages with <age>, keeping the columns aligned.
func maskAges(out string) string {
	return regexp.MustCompile(` \d+[smhd] +`).ReplaceAllStringFunc(out, func(m string) string {
		return " <age>" + strings.Repeat(" ", max(1, len(m)-len(" <age>")))
	})
}
