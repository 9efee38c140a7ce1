package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The metrics are well-formed for promtool, the probes answer, and SIGTERM stops the agent cleanly.
func TestMetricsProbesAndShutdown(t *testing.T) {
	e := newEnv(t, "metrics")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized}})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	a := e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	waitReady(t, a)
	waitHealthy(t, a)

	code, body, err := a.Get(a.MetricsPort, "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	m := harness.ParseMetrics(body)
	for name, want := range map[string]float64{
		`nodeaddr_address_info{address="192.0.2.10",family="IPv4",type="ExternalIP"}`: 1,
		`nodeaddr_uninitialized_taint`:                                  0,
		`nodeaddr_node_writes_total{kind="addresses",result="success"}`: 1,
		`nodeaddr_node_writes_total{kind="taint",result="success"}`:     1,
		`nodeaddr_reaction_seconds_count`:                               0,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	for _, name := range []string{`nodeaddr_build_info{goversion=`, `nodeaddr_resolutions_total{result="success"}`,
		`process_resident_memory_bytes`, `go_goroutines`} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	promtoolCheck(t, body)

	// A kernel change produces a reaction-latency observation.
	e.ns.IP("addr", "add", "192.0.2.20/24", "dev", "eth0")
	e.ns.IP("addr", "del", "192.0.2.10/24", "dev", "eth0")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.20")})
	a.WaitMetric(`nodeaddr_reaction_seconds_count`, 10*time.Second, func(v float64) bool { return v == 1 })

	a.Signal(syscall.SIGTERM)
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not exit after SIGTERM")
	}
	if code := a.Stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
}

func waitHealthy(t *testing.T, a *harness.Agent) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, 50*time.Millisecond, "agent healthy", func() (bool, string) {
		code, body, err := a.Get(a.ProbePort, "/healthz")
		return err == nil && code == 200, fmt.Sprintf("/healthz %d %q %v", code, body, err)
	})
}

// promtoolCheck runs `promtool check metrics` on an exposition.
func promtoolCheck(t *testing.T, body string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("NODEADDR_E2E") == "require" {
			t.Fatalf("promtool not found (NODEADDR_E2E=require; .ci/run installs Debian's prometheus)")
		}
		t.Logf("SKIPPING promtool check: promtool not found (install Debian's prometheus package)")
		return
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
