//go:build bench

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// threadSwitches returns voluntary+nonvoluntary context switches per thread (tid -> comm, count).
func threadSwitches(pid int) map[int][2]int {
	out := map[int][2]int{}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, p := range tasks {
		tid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var v, nv int
		for _, l := range strings.Split(string(b), "\n") {
			k, val, _ := strings.Cut(l, ":")
			n, _ := strconv.Atoi(strings.TrimSpace(val))
			switch k {
			case "voluntary_ctxt_switches":
				v = n
			case "nonvoluntary_ctxt_switches":
				nv = n
			}
		}
		out[tid] = [2]int{v, nv}
	}
	return out
}

// wakeups is what watchWakeups saw.
type wakeups struct {
	took     time.Duration
	switches int    // context switches of all threads
	events   int    // wake events: bursts of switches less than 150 ms apart
	samples  string // every 20 ms, each thread whose switch count moved
}

// watchWakeups samples the context switches of pid's threads every 20 ms for d (from /proc, no
// ptrace, so the agent is not disturbed) and groups them into wake events. A single wakeup of the Go
// runtime is a burst of tens of switches (sysmon polls every 20 µs while a P is busy), so events,
// not switches, count how often something woke the process.
func watchWakeups(pid int, d time.Duration) wakeups {
	var w wakeups
	var samples strings.Builder
	var last time.Time // the latest move of the current event
	prev := threadSwitches(pid)
	t0 := time.Now()
	for time.Since(t0) < d { // measured window: d, sampled every 20 ms
		time.Sleep(20 * time.Millisecond) // measured window: the sampling period
		cur := threadSwitches(pid)
		now := time.Now()
		moved := false
		for tid, c := range cur {
			if n := c[0] + c[1] - prev[tid][0] - prev[tid][1]; n != 0 {
				moved = true
				w.switches += n
				fmt.Fprintf(&samples, "%s tid=%d +%d\n", now.UTC().Format("15:04:05.000"), tid, n)
			}
		}
		if moved {
			if last.IsZero() || now.Sub(last) > 150*time.Millisecond {
				w.events++
			}
			last = now
		}
		prev = cur
	}
	w.took, w.samples = time.Since(t0), samples.String()
	return w
}

// TestWakeups is a diagnostic of what wakes the idle agent (nothing but the resync should), not
// part of the report: it runs only when $NODEADDR_WAKEUP_OUT names an output directory. It lets the agent publish,
// then idles it for $NODEADDR_WAKEUP_IDLE seconds (default 210) and writes there:
//   - samples.txt: every 20 ms, each thread whose context-switch count moved (no ptrace involved);
//   - switches.txt: per-thread totals, and wake events (switches less than 150 ms apart) per minute;
//   - strace.txt: `strace -f` of the window, unless NODEADDR_WAKEUP_STRACE=0 (strace's stops
//     inflate the switch counts several times, so count without it and classify with it);
//   - agent.log: the agent's log and a goroutine dump (SIGQUIT, GOTRACEBACK=all) at the end.
//
// $NODEADDR_WAKEUP_ARGS adds agent flags, $NODEADDR_WAKEUP_ENV agent environment variables
// (e.g. GODEBUG=gctrace=1 or HTTP2_READ_IDLE_TIMEOUT_SECONDS=90). NODEADDR_WAKEUP_PROBES=1 probes
// the agent as the kubelet does with deploy/daemonset.yaml.
func TestWakeups(t *testing.T) {
	out := os.Getenv("NODEADDR_WAKEUP_OUT")
	if out == "" {
		t.Skip("diagnostic: set NODEADDR_WAKEUP_OUT to an output directory to run it")
	}
	idle := time.Duration(envInt("NODEADDR_WAKEUP_IDLE", 210)) * time.Second
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "idle")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized}})
	a := harness.StartAgent(t, e.NS, harness.AgentOptions{
		Args: append([]string{"--node-name=" + e.node, "--internal-ip-target=none", "--external-ip-target=8.8.8.8"},
			strings.Fields(os.Getenv("NODEADDR_WAKEUP_ARGS"))...),
		Kubeconfig: e.Kubeconfig,
		Env:        append([]string{"GOTRACEBACK=all"}, strings.Fields(os.Getenv("NODEADDR_WAKEUP_ENV"))...),
	})
	e.cp.WaitNode(t, e.node, 30*time.Second, "published", func(n *corev1.Node) bool { return addrs(n) != "" && !hasUninit(n) })
	time.Sleep(5 * time.Second) // measured window: the agent settles before its wakeups are counted
	pid := a.Pid()
	t.Logf("agent pid %d, idling %s, output in %s", pid, idle, out)

	useStrace := os.Getenv("NODEADDR_WAKEUP_STRACE") != "0"
	strace := exec.Command("strace", "-f", "-tt", "-T", "-yy", "-s", "64", "-o", filepath.Join(out, "strace.txt"),
		"-p", strconv.Itoa(pid))
	if useStrace {
		if err := strace.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // kernel interval: strace attaches (ptrace)
	}
	if os.Getenv("NODEADDR_WAKEUP_PROBES") != "" {
		// What the kubelet does with deploy/daemonset.yaml: /readyz every 5 s, /healthz every 10 s,
		// a new connection each time.
		done := make(chan struct{})
		defer close(done)
		go func() {
			tick := time.NewTicker(5 * time.Second)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				_, _, _ = a.Get(a.ProbePort, "/readyz")
				if i%2 == 0 {
					_, _, _ = a.Get(a.ProbePort, "/healthz")
				}
			}
		}()
	}
	s0, c0 := threadSwitches(pid), cpuSeconds(t, pid)
	w := watchWakeups(pid, idle)
	s1, c1 := threadSwitches(pid), cpuSeconds(t, pid)
	took := w.took
	if useStrace {
		_ = strace.Process.Signal(syscall.SIGINT)
		_ = strace.Wait()
	}

	var tids []int
	for tid := range s1 {
		tids = append(tids, tid)
	}
	sort.Ints(tids)
	var b strings.Builder
	fmt.Fprintf(&b, "window %s (strace %v), CPU %.2f s\n", took.Round(time.Second), useStrace, c1-c0)
	total := 0
	for _, tid := range tids {
		d := [2]int{s1[tid][0] - s0[tid][0], s1[tid][1] - s0[tid][1]}
		total += d[0] + d[1]
		fmt.Fprintf(&b, "tid %d: voluntary %d nonvoluntary %d\n", tid, d[0], d[1])
	}
	fmt.Fprintf(&b, "total %d switches (%.1f/min), %d wake events (%.2f/min)\n", total,
		float64(total)/took.Minutes(), w.events, float64(w.events)/took.Minutes())
	for name, data := range map[string]string{"samples.txt": w.samples, "switches.txt": b.String()} {
		if err := os.WriteFile(filepath.Join(out, name), []byte(data), 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Log(b.String())

	// Goroutine dump (the agent exits 2 on SIGQUIT).
	a.Signal(syscall.SIGQUIT)
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
	}
	if err := os.WriteFile(filepath.Join(out, "agent.log"), []byte(a.Logs()), 0o644); err != nil {
		t.Error(err)
	}
}
