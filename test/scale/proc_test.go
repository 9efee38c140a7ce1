//go:build bench

package scale

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat (100 on Linux).
const clockTicks = 100

// apiProcess is the kube-apiserver process of the test's control plane, found in /proc by its port.
type apiProcess struct{ pid string }

func findAPIServer(t *testing.T, port int) apiProcess {
	t.Helper()
	flag := []byte("--secure-port=" + strconv.Itoa(port))
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(cmdline, []byte{0})
		if len(args) > 0 && filepath.Base(string(args[0])) == "kube-apiserver" && bytes.Contains(cmdline, flag) {
			return apiProcess{pid: filepath.Base(d)}
		}
	}
	t.Logf("kube-apiserver process not found: CPU and RSS figures will be 0")
	return apiProcess{}
}

// cpuSeconds is the process's user+system CPU time so far.
func (p apiProcess) cpuSeconds() float64 {
	if p.pid == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join("/proc", p.pid, "stat"))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces: split after it.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// Fields now start at field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (ut + st) / clockTicks
}

func (p apiProcess) rssMiB() float64 {
	if p.pid == "" {
		return 0
	}
	return procRSSMiB(p.pid)
}

// procRSSMiB reads VmRSS from /proc/PID/status.
func procRSSMiB(pid string) float64 {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// reniceSelf sets every thread of this process to nice n (on Linux a nice value is a thread's, and
// threads created later inherit their creator's); the control plane's processes keep theirs.
func reniceSelf(n int) error {
	tasks, err := filepath.Glob("/proc/self/task/[0-9]*")
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(filepath.Base(task))
		if err != nil {
			return err
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("nice %d for thread %d: %w", n, tid, err)
		}
	}
	return nil
}
