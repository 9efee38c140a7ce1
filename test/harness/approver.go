package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApproverUser is the API user of the central approver's ServiceAccount (deploy/rbac.yaml holds it,
// deploy/components/kubelet-serving-csr binds it), as audit records name it.
const ApproverUser = "system:serviceaccount:kube-system:nodeaddr-approver"

// Approver is a running `nodeaddr approver` on the host (not in a network namespace: the
// Deployment's pods use no host network), serving /healthz, /readyz and /metrics on 127.0.0.1:Port.
type Approver struct {
	Port int
	t    testing.TB
	p    *proc
	mu   sync.Mutex
	logs strings.Builder
}

// ApproverToken returns a one-hour token of the ServiceAccount kube-system/nodeaddr-approver.
func (cp *ControlPlane) ApproverToken(t testing.TB) string {
	t.Helper()
	return cp.ServiceAccountToken(t, "nodeaddr-approver")
}

// ServiceAccountToken returns a one-hour token of the ServiceAccount kube-system/name.
func (cp *ControlPlane) ServiceAccountToken(t testing.TB, name string) string {
	t.Helper()
	exp := int64(3600)
	tr, err := cp.Admin.CoreV1().ServiceAccounts("kube-system").CreateToken(context.Background(), name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s token: %v", name, err)
	}
	return tr.Status.Token
}

// StartApprover runs `nodeaddr approver --kubeconfig=<token of nodeaddr-approver>
// --leader-elect=false --bind-address=127.0.0.1:<free port>` and args, as uid/gid 65532 without
// capabilities (the Deployment's securityContext), and waits until /readyz answers 200 (its
// informers have synced). It is stopped when t ends.
func StartApprover(t testing.TB, cp *ControlPlane, args ...string) *Approver {
	t.Helper()
	return StartClusterSide(t, cp, "approver", "nodeaddr-approver", args...)
}

// StartClusterSide runs `nodeaddr <command>` (a cluster-side command: approver, remediator,
// conflicts) with a
// token of kube-system/<serviceAccount>, as StartApprover does.
func StartClusterSide(t testing.TB, cp *ControlPlane, command, serviceAccount string, args ...string) *Approver {
	t.Helper()
	bins := MustBuild(t)
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	a := &Approver{Port: port, t: t}
	kubeconfig := Kubeconfig(t, AgentDir(t), cp.Config.Host, cp.ServiceAccountToken(t, serviceAccount))
	argv := append([]string{command, "--kubeconfig=" + kubeconfig, "--leader-elect=false",
		fmt.Sprintf("--bind-address=127.0.0.1:%d", port)}, args...)
	cmd := exec.Command(bins.Nodeaddr, argv...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	// Set in the child before its parent-death signal (unlike setpriv's, which clears it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532, Groups: []uint32{}}}
	pw, done := pumpLogs(t, cmd, command, &a.mu, &a.logs)
	if a.p, err = startProc(cmd); err != nil {
		t.Fatalf("start nodeaddr %s: %v", command, err)
	}
	go func() { <-a.p.done; pw.Close() }()
	t.Cleanup(func() {
		a.Stop()
		<-done
	})
	if err := Poll(30*time.Second, 50*time.Millisecond, "nodeaddr "+command+" ready", func() (bool, string) {
		code, _, err := a.Get("/readyz")
		if err == nil && code == http.StatusOK {
			return true, ""
		}
		select {
		case <-a.p.done:
			t.Fatalf("nodeaddr %s exited before ready (%s):\n%s", command, a.p.cmd.ProcessState, a.Logs())
		default:
		}
		return false, fmt.Sprintf("GET /readyz: %d, %v", code, err)
	}); err != nil {
		t.Fatalf("%v\n%s", err, a.Logs())
	}
	return a
}

// Stop sends SIGTERM and waits; it returns the exit code.
func (a *Approver) Stop() int {
	a.p.stop()
	return a.p.cmd.ProcessState.ExitCode()
}

// Logs returns what the approver logged so far.
func (a *Approver) Logs() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.logs.String()
}

// Get fetches path from the approver's listener.
func (a *Approver) Get(path string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", a.Port, path))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Metrics scrapes /metrics into `name{labels}` → value.
func (a *Approver) Metrics() (map[string]float64, error) {
	code, body, err := a.Get("/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %d", code)
	}
	return ParseMetrics(body), nil
}

// Metric returns one sample (`name{labels}` as exposed; 0 when absent), failing the test that
// started the approver when the scrape fails (call Metrics from a subtest).
func (a *Approver) Metric(name string) float64 {
	a.t.Helper()
	m, err := a.Metrics()
	if err != nil {
		a.t.Fatalf("scrape approver: %v", err)
	}
	return m[name]
}
