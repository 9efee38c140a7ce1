package soak

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The pressure fault starves the node: stress-ng's CPU, sync and disk-write workers run
// in the node's network namespace beside everything else (the agent, the oracle, the API server
// and etcd share the machine's cores and disk), and the agent runs under a CPU quota as a pod
// limit gives it (the CFS bandwidth controller of its cgroup: 100 ms periods, 50 to 500 ms of CPU
// per second), or, one time in five, without one. An idle agent's bursts fit in such a quota (an
// hour's 37 faults throttled it in one period of 100 ms), so a busy neighbour shares it: one
// stress-ng CPU worker in the same cgroup, as a busy container in the agent's pod would. Every
// invariant is checked as for any fault: starvation may make the agent later, never wrong.

// cpuCgroup is a CPU cgroup of the soak's own for the agent ("" dir: none could be made).
type cpuCgroup struct {
	dir  string // the soak's cgroup
	root string // the hierarchy's root, where the agent goes back
	v2   bool
}

// startPressure checks that stress-ng is installed and makes the agent's CPU cgroup.
func (s *soak) startPressure() {
	harness.Tool(s.t, "stress-ng", "stress-ng") // skips saying so, or fails under NODEADDR_E2E=require (CI)
	s.stressDir = s.t.TempDir()
	s.cg = newCPUCgroup(fmt.Sprintf("nodeaddr-soak-%d", os.Getpid()))
	if s.cg.dir == "" {
		s.rec.event("pressure", "no CPU cgroup could be made: the pressure fault runs without a quota")
		return
	}
	s.t.Cleanup(s.cg.remove)
}

// newCPUCgroup makes a cgroup with the CPU controller, on cgroup v2 or on v1's cpu hierarchy.
func newCPUCgroup(name string) *cpuCgroup {
	for _, c := range []cpuCgroup{{root: "/sys/fs/cgroup", v2: true}, {root: "/sys/fs/cgroup/cpu"}, {root: "/sys/fs/cgroup/cpu,cpuacct"}} {
		if c.v2 {
			ctl, err := os.ReadFile(filepath.Join(c.root, "cgroup.subtree_control"))
			if err != nil || !strings.Contains(string(ctl), "cpu") {
				continue
			}
		} else if _, err := os.Stat(filepath.Join(c.root, "cpu.cfs_quota_us")); err != nil {
			continue
		}
		c.dir = filepath.Join(c.root, name)
		if err := os.Mkdir(c.dir, 0o755); err != nil && !os.IsExist(err) {
			continue
		}
		return &c
	}
	return &cpuCgroup{}
}

// limit sets the quota, in thousandths of a CPU (a pod's millicores).
func (c *cpuCgroup) limit(milli int) error {
	quota := strconv.Itoa(milli * 100) // µs per 100 ms period
	if c.v2 {
		return os.WriteFile(filepath.Join(c.dir, "cpu.max"), []byte(quota+" 100000"), 0o644)
	}
	if err := os.WriteFile(filepath.Join(c.dir, "cpu.cfs_period_us"), []byte("100000"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.dir, "cpu.cfs_quota_us"), []byte(quota), 0o644)
}

// move puts pid into the soak's cgroup (in true) or back into the root.
func (c *cpuCgroup) move(pid int, in bool) error {
	dir := c.root
	if in {
		dir = c.dir
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// remove moves whatever is left in the cgroup back to the root and deletes it.
func (c *cpuCgroup) remove() {
	b, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			c.move(pid, false)
		}
	}
	os.Remove(c.dir)
}

// pressure runs stress-ng for 3 to 15 s with the agent under a random CPU quota. The agent's
// requests may leave late while it is throttled: the interval counts as a stall for invariant 2,
// as a frozen agent's does.
func pressure(s *soak, r *rand.Rand, _ uplink) {
	d := time.Duration(3+r.IntN(13)) * time.Second
	cpu, syncs, hdd := 1+r.IntN(3), r.IntN(3), r.IntN(2)
	milli := []int{0, 50, 100, 200, 500}[r.IntN(5)] // 0: no quota
	a := s.w.currentAgent()
	quota, limited := "no CPU quota", false
	if milli > 0 && s.cg != nil && s.cg.dir != "" {
		if err := s.cg.limit(milli); err != nil {
			quota = fmt.Sprintf("no CPU quota (%v)", err)
		} else if err := s.cg.move(a.Pid(), true); err != nil {
			quota = fmt.Sprintf("no CPU quota (%v)", err)
		} else {
			quota, limited = fmt.Sprintf("the agent limited to %dm CPU, shared with a busy neighbour", milli), true
			defer s.cg.move(a.Pid(), false)
		}
	}
	s.report6("pressure", "stress-ng for %s: %d CPU, %d sync and %d disk-write workers; %s", d, cpu, syncs, hdd, quota)
	from := time.Now()
	// A count of 0 would mean one worker per CPU to stress-ng: a stressor with none is left out.
	args := []string{"--cpu", strconv.Itoa(cpu), "--timeout", strconv.Itoa(int(d / time.Second)), "--quiet"}
	if syncs > 0 {
		args = append(args, "--io", strconv.Itoa(syncs))
	}
	if hdd > 0 {
		args = append(args, "--hdd", strconv.Itoa(hdd), "--hdd-bytes", "32M", "--temp-path", s.stressDir)
	}
	var neighbour *exec.Cmd
	before := s.cg.throttled()
	if limited {
		// The neighbour joins the cgroup before it starts its worker (which inherits it). It runs
		// outside the node's namespace: `ip netns exec` mounts a sysfs of its own over /sys,
		// which hides the cgroup hierarchy.
		neighbour = exec.Command("sh", "-c", `echo $$ > "$0" && exec stress-ng --cpu 1 --timeout "$1" --quiet`,
			filepath.Join(s.cg.dir, "cgroup.procs"), strconv.Itoa(int(d/time.Second)))
		if err := neighbour.Start(); err != nil {
			s.report6("pressure", "the agent's neighbour: %v", err)
			neighbour = nil
		}
	}
	if out, err := s.w.ns.Exec("stress-ng", args...).CombinedOutput(); err != nil {
		s.rec.event("pressure", "stress-ng: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if neighbour != nil {
		neighbour.Wait()
	}
	if n := s.cg.throttled() - before; n > 0 {
		s.report6("pressure", "the agent's cgroup was throttled in %d periods of 100 ms", n)
		s.rec.mu.Lock()
		s.rec.throttled += n
		s.rec.mu.Unlock()
	}
	s.rec.stall(from, time.Now())
}

// throttled is the number of periods in which the cgroup's quota stopped it (0 without one).
func (c *cpuCgroup) throttled() int {
	if c == nil || c.dir == "" {
		return 0
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, "cpu.stat"))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "nr_throttled" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}
