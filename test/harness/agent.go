package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Agent is a running nodeaddr process inside a namespace.
type Agent struct {
	NS          *Netns
	MetricsPort int
	ProbePort   int
	t           testing.TB
	p           *proc
	mu          sync.Mutex
	logs        strings.Builder
}

// AgentOptions configure how the agent runs.
type AgentOptions struct {
	// Args are nodeaddr's flags; --kubeconfig, --metrics-bind-address (with --metrics-secure=false,
	// unless set) and --health-probe-bind-address are added unless present.
	Args []string
	// Privileged runs as root with all capabilities; by default the agent runs as uid 65532 with
	// every capability dropped, as the DaemonSet does.
	Privileged bool
	// Kubeconfig overrides the generated kubeconfig ("none" for no kubeconfig at all).
	Kubeconfig string
	// Env are extra NAME=value environment variables (as a pod spec's env would set).
	Env []string
}

// AgentDir returns a world-readable directory for files the agent reads.
func AgentDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "nodeaddr-agent-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// AgentKubeconfig sets up the loopback relay into ns and returns a kubeconfig with a token bound to
// a pod on node.
func (cp *ControlPlane) AgentKubeconfig(t testing.TB, ns *Netns, node string) string {
	t.Helper()
	ns.Relay(cp.Port, fmt.Sprintf("127.0.0.1:%d", cp.Port))
	return Kubeconfig(t, AgentDir(t), fmt.Sprintf("https://127.0.0.1:%d", cp.Port), cp.AgentToken(t, node))
}

func (o AgentOptions) command(t testing.TB, ns *Netns, bin string, metricsPort, probePort int) *exec.Cmd {
	args := append([]string(nil), o.Args...)
	has := func(flag string) bool {
		for _, a := range args {
			if a == "--"+flag || strings.HasPrefix(a, "--"+flag+"=") {
				return true
			}
		}
		return false
	}
	if o.Kubeconfig != "" && o.Kubeconfig != "none" && !has("kubeconfig") {
		args = append(args, "--kubeconfig="+o.Kubeconfig)
	}
	if !has("metrics-bind-address") {
		args = append(args, fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort))
		// Plain HTTP on loopback for Agent.Metrics, unless the test asks for secure metrics.
		if !has("metrics-secure") {
			args = append(args, "--metrics-secure=false")
		}
	}
	if !has("health-probe-bind-address") {
		args = append(args, fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort))
	}
	var argv []string
	if !o.Privileged {
		argv = []string{"setpriv", "--reuid=65532", "--regid=65532", "--clear-groups",
			"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"}
	}
	argv = append(argv, bin)
	argv = append(argv, args...)
	cmd := ns.Exec(argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin"}, o.Env...)
	return cmd
}

// StartAgent starts nodeaddr in ns; it is stopped when t ends (and its exit checked then).
func StartAgent(t testing.TB, ns *Netns, o AgentOptions) *Agent {
	t.Helper()
	bins := MustBuild(t)
	a := &Agent{NS: ns, t: t, MetricsPort: 19810, ProbePort: 19811}
	cmd := o.command(t, ns, bins.Nodeaddr, a.MetricsPort, a.ProbePort)
	pw, done := pumpLogs(t, cmd, "agent", &a.mu, &a.logs)
	p, err := startProc(cmd)
	if err != nil {
		t.Fatalf("start nodeaddr: %v", err)
	}
	go func() { <-p.done; pw.Close() }()
	a.p = p
	t.Cleanup(func() {
		a.Stop()
		<-done
	})
	return a
}

// Stop sends SIGTERM and waits; it returns the exit code.
func (a *Agent) Stop() int {
	a.p.stop()
	return a.p.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the agent (to `ip netns exec`, which execs setpriv, which execs nodeaddr:
// one process).
func (a *Agent) Signal(sig syscall.Signal) { a.p.cmd.Process.Signal(sig) }

// Done is closed when the agent exits.
func (a *Agent) Done() <-chan struct{} { return a.p.done }

// ExitStatus says how the agent ended ("exit status 1", "signal: killed"); empty while it runs.
func (a *Agent) ExitStatus() string {
	select {
	case <-a.p.done:
		return a.p.cmd.ProcessState.String()
	default:
		return ""
	}
}

// Pid is the agent's process id.
func (a *Agent) Pid() int { return a.p.cmd.Process.Pid }

// Logs returns what the agent logged so far.
func (a *Agent) Logs() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.logs.String()
}

// RunAgent runs nodeaddr to completion (for --run-once and bad input) and returns its exit code
// and combined output.
func RunAgent(t testing.TB, ns *Netns, o AgentOptions, timeout time.Duration) (int, string) {
	t.Helper()
	bins := MustBuild(t)
	cmd := o.command(t, ns, bins.Nodeaddr, 19810, 19811)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { <-ctx.Done(); cmd.Process.Kill() }()
	cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("nodeaddr did not exit within %s:\n%s", timeout, out.String())
	}
	t.Logf("nodeaddr exited %d:\n%s", cmd.ProcessState.ExitCode(), out.String())
	return cmd.ProcessState.ExitCode(), out.String()
}

// Get fetches path from the agent's metrics or probe port inside its namespace.
func (a *Agent) Get(port int, path string) (int, string, error) {
	resp, err := a.NS.HTTPClient().Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?)\s+(\S+)`)

// Metrics scrapes /metrics into a map from `name{labels}` (as exposed) to value.
func (a *Agent) Metrics() (map[string]float64, error) {
	code, body, err := a.Get(a.MetricsPort, "/metrics")
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("/metrics: %d", code)
	}
	return ParseMetrics(body), nil
}

// ParseMetrics parses the Prometheus text format into `name{labels}` → value.
func ParseMetrics(body string) map[string]float64 {
	out := map[string]float64{}
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		m := sampleRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err == nil {
			out[m[1]] = v
		}
	}
	return out
}

// Metric returns one sample, failing the test when the scrape fails.
func (a *Agent) Metric(name string) float64 {
	a.t.Helper()
	m, err := a.Metrics()
	if err != nil {
		a.t.Fatalf("scrape: %v", err)
	}
	return m[name]
}

// WaitMetric polls until cond(value) holds.
func (a *Agent) WaitMetric(name string, timeout time.Duration, cond func(float64) bool) float64 {
	a.t.Helper()
	var v float64
	Eventually(a.t, timeout, 50*time.Millisecond, "metric "+name+" meets its condition", func() (bool, string) {
		m, err := a.Metrics()
		v = m[name]
		return err == nil && cond(v), fmt.Sprintf("value %v, err %v", v, err)
	})
	return v
}

// failedLogLines is how many of a process's last lines a failed test shows when not verbose.
const failedLogLines = 60

// pumpLogs sends cmd's stdout and stderr, line by line, into logs (under mu) and, with go test -v
// unless NODEADDR_E2E_QUIET is set, to t's log with prefix as they come. Without -v a failed test
// shows only the last failedLogLines lines, once the process has exited: a process's whole log
// (thousands of lines in the approval suite) would bury the failure's own message in CI's excerpt
// of the output. Close the returned writer when the process has exited; done closes once every
// line is read.
func pumpLogs(t testing.TB, cmd *exec.Cmd, prefix string, mu *sync.Mutex, logs *strings.Builder) (*io.PipeWriter, <-chan struct{}) {
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	done := make(chan struct{})
	stream := testing.Verbose() && os.Getenv("NODEADDR_E2E_QUIET") == ""
	if !stream {
		// Registered first, so it runs after the caller's cleanup has stopped the process and
		// read its last line.
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			mu.Lock()
			lines := strings.Split(strings.TrimRight(logs.String(), "\n"), "\n")
			mu.Unlock()
			if n := len(lines) - failedLogLines; n > 0 {
				t.Logf("%s: %d earlier lines left out (go test -v shows them all)", prefix, n)
				lines = lines[n:]
			}
			t.Log(prefix + ": " + strings.Join(lines, "\n"+prefix+": "))
		})
	}
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if stream {
				t.Log(prefix + ": " + sc.Text())
			}
		}
	}()
	return pw, done
}
