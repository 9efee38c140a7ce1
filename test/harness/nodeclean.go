package harness

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// teardown stops the node and removes everything it left on the machine, even when the test
// failed half-way: the kubelet, every container (through runc, which also removes its cgroups),
// the shims (they outlive containerd), containerd, the mounts under Dir (token tmpfs, overlay
// rootfs, sandbox netns), the kubelet's cgroup root, libcni's cache files and Dir itself.
func (n *RealNode) teardown() {
	if n.T.Failed() {
		for _, f := range []string{"kubelet.log", "containerd.log"} {
			n.T.Logf("last lines of %s:\n%s", f, tailFile(filepath.Join(n.Dir, f), 40))
		}
	}
	n.kubelet.stop()
	cleanNodeDir(n.Dir, n.C.Bins, func() { n.containerd.stop() })
}

// cleanNodeDir removes what a node whose state is in dir left behind; stopContainerd stops its
// containerd if this process runs it (a leftover from a killed run has none: its shims are killed).
func cleanNodeDir(dir string, nb NodeBinaries, stopContainerd func()) {
	// A kubelet left by a killed run would restart what runc deletes.
	for _, pid := range processesWith(nb.Kubelet, filepath.Join(dir, "kubelet.yaml")) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	runcRoot := filepath.Join(dir, "runc")
	nss, _ := os.ReadDir(runcRoot)
	for _, ns := range nss {
		root := filepath.Join(runcRoot, ns.Name())
		out, _ := exec.Command(nb.Runc, "--root", root, "list", "-q").Output()
		for _, id := range strings.Fields(string(out)) {
			exec.Command(nb.Runc, "--root", root, "delete", "--force", id).Run()
			// libcni's cache (no setting moves it) names each sandbox's attachments.
			m, _ := filepath.Glob("/var/lib/cni/results/*-" + id + "-*")
			for _, f := range m {
				os.Remove(f)
			}
		}
	}
	socket := filepath.Join(dir, "c.sock")
	for _, pid := range processesWith(nb.Shim, socket) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if stopContainerd != nil {
		stopContainerd()
	}
	for _, pid := range processesWith(nb.Containerd, filepath.Join(dir, "containerd.toml")) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	time.Sleep(100 * time.Millisecond) // kernel interval: killed processes release their mounts
	unmountUnder(dir)
	removeCgroups(filepath.Base(dir))
	// The namespaces the node used (RecordNetns), deleted here only for a killed run's leftovers:
	// a live test deletes its own.
	if stopContainerd == nil {
		b, _ := os.ReadFile(filepath.Join(dir, "netns"))
		for _, name := range strings.Fields(string(b)) {
			exec.Command("ip", "netns", "del", name).Run()
		}
	}
	os.RemoveAll(dir)
}

// processesWith returns the pids whose executable is exe and whose command line contains arg.
func processesWith(exe, arg string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// A binary replaced since the process started (a rebuild of the cache) reads "... (deleted)".
		target, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if strings.TrimSuffix(target, " (deleted)") != exe {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte(arg)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// unmountUnder lazily unmounts every mount point below dir, deepest first.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// removeCgroups removes the cgroup named root (the kubelet's cgroupRoot) from every v1 hierarchy,
// children first, and containerd's k8s.io parent if it is empty (runc removed the containers'
// cgroups under it; with cgroupsPerQOS false the CRI gives pods no cgroup parent). rmdir fails on a
// cgroup still in use, so another node's containers are never touched.
func removeCgroups(root string) {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		syscall.Rmdir(filepath.Join(h, "k8s.io"))
		top := filepath.Join(h, root)
		var dirs []string
		filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			syscall.Rmdir(dirs[i])
		}
	}
}

// makeCgroups creates the kubelet's cgroupRoot in every v1 hierarchy (the kubelet reads its stats).
func makeCgroups(root string) {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		if filepath.Base(h) != "unified" {
			os.Mkdir(filepath.Join(h, root), 0o755)
		}
	}
}

// sweepNodeLeftovers cleans the node directories of earlier runs whose test process is gone (killed
// by a timeout before its cleanups ran), so a second run never meets them.
func sweepNodeLeftovers(nb NodeBinaries) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "rn*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner"))
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			continue
		}
		cleanNodeDir(d, nb, nil)
	}
}
