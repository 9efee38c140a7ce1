package node

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// kubectl nodeaddr on the renumbering day: the real plugin, run through kubectl
// as an operator runs it, against the real node after its renumberings.

var updatePlugin = flag.Bool("update-plugin", false, "rewrite testdata/plugin-status.golden from this run")

// hostWeb is the hostNetwork pod's Deployment, label and Service: what an ingress controller,
// node-local DNS or an exporter is, a pod on the node's address behind a Service.
const hostWeb = "hostweb"

// startHostWeb creates the hostNetwork Deployment and its Service before the node is ready, so the
// pod starts on the node's first address (nothing waits for it until the renumberings).
func (d *day) startHostWeb(t *testing.T) {
	grace := int64(1) // webpod is PID 1 without a SIGTERM handler: it would take the default 30 s to stop
	labels := map[string]string{"app": hostWeb}
	ctx := context.Background()
	cs := d.c.CP.Admin
	_, err := cs.AppsV1().Deployments("default").Create(ctx, deployment(hostWeb, webImage, func(s *corev1.PodSpec) {
		s.HostNetwork, s.TerminationGracePeriodSeconds = true, &grace
		s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: hostWeb, Namespace: "default"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 8080, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// hostWebReady waits for the hostNetwork pod on the node's first address, listed in its Service's
// EndpointSlice, and relays the API server into the router's namespace: the operator's machine,
// outside the node, which reaches the kubelet's port over the uplink as an operator's does.
func (d *day) hostWebReady(t *testing.T) {
	d.t = t
	start := time.Now()
	harness.Eventually(d.t, 3*time.Minute, 100*time.Millisecond, "the hostNetwork pod on "+uplinkV4+" in its Service's EndpointSlice", func() (bool, string) {
		return d.hostWebSlice(uplinkV4) != "", "not in the EndpointSlice"
	})
	waited := time.Since(start)
	d.router.Relay(d.c.CP.Port, fmt.Sprintf("127.0.0.1:%d", d.c.CP.Port))
	harness.MustBuildPlugin(t)
	report(t, "hostNetwork pod behind a Service on %s: waited %s after the fresh node, plugin built %s later",
		uplinkV4, waited.Round(10*time.Millisecond), (time.Since(start) - waited).Round(10*time.Millisecond))
}

// hostWebPod is the running hostNetwork pod not being deleted, or nil.
func (d *day) hostWebPod() *corev1.Pod {
	pods, err := d.c.CP.Admin.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + hostWeb})
	if err != nil {
		return nil
	}
	for i, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return &pods.Items[i]
		}
	}
	return nil
}

// hostWebSlice returns the name of the Service's EndpointSlice when it lists exactly the running
// hostNetwork pod at ip, else "".
func (d *day) hostWebSlice(ip string) string {
	p := d.hostWebPod()
	if p == nil || !slices.ContainsFunc(p.Status.PodIPs, func(a corev1.PodIP) bool { return a.IP == ip }) {
		return ""
	}
	list, err := d.c.CP.Admin.DiscoveryV1().EndpointSlices("default").List(context.Background(),
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + hostWeb})
	if err != nil || len(list.Items) != 1 {
		return ""
	}
	s := list.Items[0]
	if len(s.Endpoints) != 1 || s.Endpoints[0].TargetRef == nil || s.Endpoints[0].TargetRef.Name != p.Name ||
		len(s.Endpoints[0].Addresses) != 1 || s.Endpoints[0].Addresses[0] != ip {
		return ""
	}
	return s.Name
}

// kubectlNodeaddr runs `kubectl nodeaddr ARGS` as an operator does on their machine (the router's
// namespace): kubectl finds the plugin on PATH, the admin's kubeconfig is KUBECONFIG. It returns
// stdout, stderr and the exit code.
func (d *day) kubectlNodeaddr(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := d.router.Exec(d.kubectl, append([]string{"nodeaddr"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(harness.MustBuildPlugin(t))+":"+os.Getenv("PATH"), "KUBECONFIG="+d.admin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		t.Fatalf("kubectl nodeaddr %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// tableRows splits a table into rows of cells (columns are two spaces or more apart).
func tableRows(out string) [][]string {
	var rows [][]string
	sep := regexp.MustCompile(`\s{2,}`)
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, sep.Split(strings.TrimSpace(line), -1))
	}
	return rows
}

var staleHeader = []string{"NODE", "NAMESPACE", "OBJECT", "WHERE", "ADDRESS", "FIX"}

// staleAfterRenumbering: after the renumberings from the addresses old to now, `kubectl nodeaddr
// status` shows the Node as nodeaddr wrote it (golden output, ages masked; the time of its last
// write), and `stale` lists nodeaddr's own pod and the hostNetwork pod and the EndpointSlice
// endpoint carrying it, each at the old address its status.podIPs kept (the Node's address when
// the kubelet first wrote the pod's status with one, rewritten only when a container restarts: the
// day waits for both pods' before renumbering, so a pod restarted during the day shows a later one,
// or none is stale), and exits 1; once the operator ran the fix commands it printed (the pods
// deleted, the DaemonSet and the Deployment start new ones on now) it lists nothing and exits 0.
func (d *day) staleAfterRenumbering(t *testing.T, now string, old ...string) {
	d.t = t
	start := time.Now()
	d.status(t)
	agent, host := d.agentPod(), d.hostWebPod()
	if agent == nil || host == nil {
		t.Fatalf("before the fixes: agent pod %v, hostNetwork pod %v", agent != nil, host != nil)
	}
	agentAt, hostAt := agent.Status.PodIP, host.Status.PodIP
	for _, p := range []*corev1.Pod{agent, host} {
		if p.Status.PodIP != now && !slices.Contains(old, p.Status.PodIP) {
			t.Fatalf("pod %s has status.podIPs %v, want %s or one of the day's old addresses %v", p.Name, p.Status.PodIPs, now, old)
		}
		for _, c := range p.Status.ContainerStatuses {
			t.Logf("pod %s at %s: container %s restarts %d, last termination %+v", p.Name, p.Status.PodIP, c.Name, c.RestartCount, c.LastTerminationState.Terminated)
		}
	}
	// The rows stale must print: each pod still at an old address, and the EndpointSlice endpoint
	// carrying the hostNetwork pod's.
	node, hostFix := d.node.Name, "kubectl -n default delete pod "+host.Name
	want := [][]string{staleHeader}
	if hostAt != now {
		want = append(want, []string{node, "default", "pod/" + host.Name, "status.podIPs", hostAt, hostFix})
	}
	if agentAt != now {
		want = append(want, []string{node, "kube-system", "pod/" + agent.Name, "status.podIPs", agentAt, "kubectl -n kube-system delete pod " + agent.Name})
	}
	if hostAt != now {
		slice := d.hostWebSlice(hostAt)
		if slice == "" {
			t.Fatalf("no EndpointSlice lists the hostNetwork pod %s at %s", host.Name, hostAt)
		}
		want = append(want, []string{node, "default", "endpointslice/" + slice, "endpoints[0].addresses (pod " + host.Name + ")", hostAt, hostFix})
	}
	if len(want) == 1 {
		t.Fatalf("both pods restarted on %s during the renumberings: nothing is left for stale to find", now)
	}
	stdout, stderr, code := d.kubectlNodeaddr(t, "stale")
	if got := tableRows(stdout); code != 1 || !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("kubectl nodeaddr stale: exit %d (want 1), stderr %q\n%s\nwant rows %q", code, stderr, stdout, want)
	}
	t.Logf("$ kubectl nodeaddr stale; echo exit $?\n%sexit %d", stdout, code)
	fixing := time.Now()
	done := d.runFixes(t, want[1:])
	harness.Eventually(d.t, 2*time.Minute, 100*time.Millisecond, "the agent pod ready on "+now+" and a hostNetwork pod on "+now+" in the EndpointSlice", func() (bool, string) {
		p := d.agentPod()
		return p != nil && (p.Name != agent.Name || agentAt == now) && podReady(p) && p.Status.PodIP == now && d.hostWebSlice(now) != "", podSeen(p) + ", EndpointSlice " + d.hostWebSlice(now)
	})
	fixed := time.Since(fixing)
	stdout, stderr, code = d.kubectlNodeaddr(t, "stale")
	if code != 0 || stdout != "" || stderr != "Nothing names an old address.\n" {
		t.Fatalf("kubectl nodeaddr stale after the fixes: exit %d (want 0), stdout %q, stderr %q", code, stdout, stderr)
	}
	t.Logf("after %q:\n$ kubectl nodeaddr stale; echo exit $?\n%sexit %d", done, stderr, code)
	report(t, "stale listed the hostNetwork pod on %s, the agent's on %s and the EndpointSlice (exit 1); fixes ran → new pods on %s %s → nothing stale (exit 0); phase %s",
		hostAt, agentAt, now, fixed.Round(10*time.Millisecond), time.Since(start).Round(10*time.Millisecond))
}

// status compares `kubectl nodeaddr status` with testdata/plugin-status.golden (the Node's name and
// the ages masked) and checks -o wide: nodeaddr among the writers, the time of its write that of
// its last write of the Node's status in the audit log (managedFields keeps whole seconds).
func (d *day) status(t *testing.T) {
	stdout, stderr, code := d.kubectlNodeaddr(t, "status")
	if code != 0 {
		t.Fatalf("kubectl nodeaddr status: exit %d, %s", code, stderr)
	}
	t.Logf("$ kubectl nodeaddr status\n%s", stdout)
	got := regexp.MustCompile(` \d+[smhd] +`).ReplaceAllStringFunc(stdout, func(m string) string {
		return " <age>" + strings.Repeat(" ", max(1, len(m)-len(" <age>")))
	})
	got = strings.ReplaceAll(got, d.node.Name, fmt.Sprintf("%-*s", len(d.node.Name), "<node>"))
	golden := filepath.Join("testdata", "plugin-status.golden")
	if *updatePlugin {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want, err := os.ReadFile(golden); err != nil || got != string(want) {
		t.Errorf("kubectl nodeaddr status (masked):\n%s\nwant (%s, -update-plugin rewrites it; %v):\n%s", got, golden, err, want)
	}
	stdout, _, code = d.kubectlNodeaddr(t, "status", "-o", "wide", "--no-headers")
	t.Logf("$ kubectl nodeaddr status -o wide --no-headers\n%s", stdout)
	var last time.Time
	for _, w := range d.agentWrites() {
		if w.ObjectRef.Subresource == "status" {
			last = w.Timestamp
		}
	}
	row := tableRows(stdout)[0]
	var written time.Time
	if len(row) > 4 {
		written, _ = time.Parse(time.RFC3339, row[4])
	}
	if code != 0 || len(row) != 12 || !slices.Contains(strings.Split(row[3], ","), vocab.FieldManager) ||
		written.After(last) || last.Sub(written) >= 2*time.Second {
		t.Errorf("status -o wide: exit %d, row %q; nodeaddr's last status write completed at %s", code, row, last.UTC().Format(time.RFC3339Nano))
	}
}

// staleCert runs `kubectl nodeaddr stale` during the contrast (no approver; the node moved from old
// to now): with csr, the kubelet's pending CSR, the kubelet serving certificate is listed (its IP
// SANs lack now, it names old, the fix approves csr) and stale exits 1; with csr "" (once the test
// approved it and the kubelet serves the new certificate) no certificate line is left. The pods the
// contrast's renumbering left on old stay listed: the contrast does not fix them.
func (d *day) staleCert(t *testing.T, old, now, csr string) {
	t.Helper()
	ran := time.Now()
	stdout, stderr, code := d.kubectlNodeaddr(t, "stale")
	took := time.Since(ran)
	rows := tableRows(stdout)
	var certs [][]string
	for _, r := range rows[1:] {
		if len(r) > 2 && r[2] == "node/"+d.node.Name {
			certs = append(certs, r)
		}
	}
	var want [][]string
	if csr != "" {
		want = [][]string{{d.node.Name, "-", "node/" + d.node.Name, "kubelet serving certificate at " + now + ":10250: IP SANs lack " + now,
			old, "kubectl certificate approve " + csr}}
	}
	if code != 1 || !slices.Equal(rows[0], staleHeader) || !slices.EqualFunc(certs, want, slices.Equal) {
		t.Errorf("kubectl nodeaddr stale (CSR %q pending): exit %d (want 1), stderr %q, certificate rows %q, want %q\n%s", csr, code, stderr, certs, want, stdout)
	}
	t.Logf("$ kubectl nodeaddr stale; echo exit $?  (%s)\n%sexit %d", took.Round(10*time.Millisecond), stdout, code)
}

// runFixes runs the FIX column's commands of rows, each once, all at once (as an operator pasting
// them would, give or take the order) with kubectl as the admin; each waits for its pod to be gone.
func (d *day) runFixes(t *testing.T, rows [][]string) []string {
	t.Helper()
	var done []string
	for _, r := range rows {
		if !slices.Contains(done, r[5]) {
			done = append(done, r[5])
		}
	}
	errs := make([]error, len(done))
	var wg sync.WaitGroup
	for i, fix := range done {
		wg.Go(func() {
			args := append([]string{"--kubeconfig", d.admin}, strings.Fields(fix)[1:]...)
			if out, err := exec.Command(d.kubectl, args...).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%s: %v: %s", fix, err, out)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return done
}
