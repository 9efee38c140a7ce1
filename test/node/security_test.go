package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// securityContext: the shipped pod security context is really applied by the kubelet, containerd
// and runc, read from the running agent's process on the host.
func (w *world) securityContext(t *testing.T) {
	w.t = t
	pid := w.agentPid()
	status := procStatus(t, pid)
	for key, want := range map[string]string{
		"Uid":        "65532\t65532\t65532\t65532",
		"Gid":        "65532\t65532\t65532\t65532",
		"Groups":     "65532", // the CRI adds the run-as group to the supplementary groups
		"CapEff":     "0000000000000000",
		"CapPrm":     "0000000000000000",
		"NoNewPrivs": "1",
		"Seccomp":    "2",
	} {
		if got := status[key]; got != want {
			t.Errorf("%s of the agent's process = %q, want %q", key, got, want)
		}
	}
	filters, _ := strconv.Atoi(status["Seccomp_filters"])
	if filters < 1 {
		t.Errorf("Seccomp_filters = %q, want ≥ 1", status["Seccomp_filters"])
	}
	probe := filepath.Join("/proc", strconv.Itoa(pid), "root", "nodeaddr-write-probe")
	err := os.WriteFile(probe, []byte("x"), 0o600)
	if err == nil {
		os.Remove(probe)
	}
	if !errors.Is(err, syscall.EROFS) {
		t.Errorf("creating a file in the agent's root filesystem: %v, want EROFS", err)
	}
	report(t, "pid %d: uid/gid %s, CapEff %s, NoNewPrivs %s, Seccomp %s (%s filters), rootfs write %v",
		pid, strings.Fields(status["Uid"])[0], status["CapEff"], status["NoNewPrivs"], status["Seccomp"],
		status["Seccomp_filters"], errors.Unwrap(err))
}

// agentPid is the host pid of the agent container's process, from containerd's task list.
func (w *world) agentPid() int {
	w.t.Helper()
	p := w.agentPod()
	if p == nil || len(p.Status.ContainerStatuses) == 0 {
		w.t.Fatal("no agent pod with a container status")
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	for _, line := range strings.Split(w.node.Ctr("tasks", "ls"), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == id {
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				w.t.Fatal(err)
			}
			return pid
		}
	}
	w.t.Fatalf("container %s not in containerd's task list", id)
	return 0
}

func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}
