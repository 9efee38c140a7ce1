// Package harness runs nodeaddr end to end: a real etcd and kube-apiserver on loopback, network
// namespaces as hosts, and the real nodeaddr binary inside them with a pod-bound ServiceAccount token.
package harness

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// KubernetesVersion is the kube-apiserver release the suite runs against (test/go.mod pins it).
const KubernetesVersion = "v1.37.2"

// k8sVersionFlags stamp version into the Kubernetes binaries, as the release build does
// (hack/lib/version.sh). Built from the module proxy without them, every component reports
// "v0.0.0-master+$Format:%H$": the Node's kubeletVersion is that, and a Helm chart's kubeVersion
// constraint refuses to install ("incompatible with Kubernetes v0.0.0-master"). -s -w leave out
// the symbol table and DWARF, as release builds do: each link takes about 40% less time (a dozen
// links in a cold run) and the build info CheckLinks reads stays.
func k8sVersionFlags(version string) []string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	pkg := "k8s.io/component-base/version."
	return []string{"-ldflags", fmt.Sprintf("-s -w -X %sgitVersion=%s -X %sgitMajor=%s -X %sgitMinor=%s -X %sgitTreeState=clean",
		pkg, version, pkg, major, pkg, minor, pkg)}
}

// k8sBinDir is where the version-stamped Kubernetes binaries (and etcd beside them) are cached.
func k8sBinDir() string { return filepath.Join(CacheDir(), "bin", "k8s-"+KubernetesVersion) }

// Binaries are the executables a test needs.
type Binaries struct {
	APIServer, Etcd, Nodeaddr string
	// Kubectl renders the kustomize base and applies manifests (test/deploy).
	Kubectl string
}

// builds memoizes Build (index 1) and BuildControlPlane (index 0) per process.
var builds [2]struct {
	once sync.Once
	bins Binaries
	err  error
}

// TestModuleDir is the directory of the test module (where go.mod of the suite lives).
func TestModuleDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// CacheDir is where built binaries are kept between runs: $NODEADDR_CACHE_DIR, else test/.cache
// (ignored by git).
func CacheDir() string {
	if d := os.Getenv("NODEADDR_CACHE_DIR"); d != "" {
		return d
	}
	return filepath.Join(TestModuleDir(), ".cache")
}

// Build builds (or reuses) kube-apiserver, etcd and kubectl, keyed by version, and always rebuilds nodeaddr
// from the main module (cheap, and a stale agent binary would test old code). Progress goes to
// progress; a cold kube-apiserver build takes about 4 minutes on 2 cores.
func Build(progress io.Writer) (Binaries, error) {
	return build(progress, true)
}

// BuildControlPlane is Build without kubectl: only what `make run` runs (kube-apiserver, etcd and
// nodeaddr), so a newcomer's first run compiles nothing it does not start. Its Kubectl is empty.
func BuildControlPlane(progress io.Writer) (Binaries, error) {
	return build(progress, false)
}

func build(progress io.Writer, withKubectl bool) (Binaries, error) {
	b := &builds[0]
	if withKubectl {
		b = &builds[1]
	}
	b.once.Do(func() { b.bins, b.err = buildBinaries(progress, withKubectl) })
	return b.bins, b.err
}

func buildBinaries(progress io.Writer, withKubectl bool) (built Binaries, err error) {
	dir := k8sBinDir()
	built = Binaries{
		APIServer: filepath.Join(dir, "kube-apiserver"),
		Etcd:      filepath.Join(dir, "etcd"),
		// One agent binary per checkout: worktrees sharing a cache never test each other's code.
		Nodeaddr: filepath.Join(CacheDir(), "bin", fmt.Sprintf("checkout-%08x", crc32.ChecksumIEEE([]byte(RepoDir()))), "nodeaddr"),
	}
	k8s := []struct{ out, pkg string }{
		{built.APIServer, "./cmd/kube-apiserver"},
		{built.Etcd, "./cmd/etcd"},
	}
	if withKubectl {
		built.Kubectl = filepath.Join(dir, "kubectl")
		k8s = append(k8s, struct{ out, pkg string }{built.Kubectl, "./cmd/kubectl"})
	}
	for _, b := range k8s {
		if _, err := os.Stat(b.out); err == nil {
			continue
		}
		if err := goBuild(progress, TestModuleDir(), b.pkg, b.out, nil, k8sVersionFlags(KubernetesVersion)...); err != nil {
			return built, err
		}
	}
	// The agent is built exactly as the Dockerfile and `make build` build it: static.
	err = goBuild(progress, filepath.Dir(TestModuleDir()), "./cmd/nodeaddr", built.Nodeaddr,
		[]string{"CGO_ENABLED=0"})
	return built, err
}

func goBuild(progress io.Writer, dir, pkg, out string, env []string, flags ...string) error {
	fmt.Fprintf(progress, "harness: building %s -> %s (a cold kube-apiserver build takes ~4 min on 2 cores)\n", pkg, out)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp%d", out, os.Getpid())
	args := append(append([]string{"build", "-v"}, flags...), "-o", tmp, pkg)
	if err := runGo(progress, dir, pkg, env, args...); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}

// runGo runs `go ARGS...` in dir and turns the package list that -v prints into a progress line
// every 100 packages; on failure the error carries the last lines of output.
func runGo(progress io.Writer, dir, label string, env []string, args ...string) error {
	start := time.Now()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	var tail []string
	n := 0
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		n++
		tail = append(tail, sc.Text())
		if len(tail) > 20 {
			tail = tail[1:]
		}
		if n%100 == 0 {
			fmt.Fprintf(progress, "harness: %s: %d packages compiled (%s)\n", label, n, time.Since(start).Round(time.Second))
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, strings.Join(tail, "\n"))
	}
	fmt.Fprintf(progress, "harness: built %s in %s\n", label, time.Since(start).Round(time.Second))
	return nil
}

// MustBuild is Build for tests.
func MustBuild(t testing.TB) Binaries {
	t.Helper()
	return mustBuild(t, "build", Build)
}

// mustBuild runs build with progress on stderr and fails t with what and the error if it fails.
func mustBuild[T any](t testing.TB, what string, build func(io.Writer) (T, error)) T {
	t.Helper()
	v, err := build(os.Stderr)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// proxyModule is a binary built from the Go module proxy in a build module of its own, generated
// under the cache directory (src/DIR), so that test/go.mod never requires what it needs.
type proxyModule struct {
	name   string // for progress: "kubesd (Prometheus v0.305.0)"
	dir    string // under CacheDir()/src
	module string // the build module's path
	// requires are strings the build module's go.mod holds once `go get` has run: without one of
	// them, go.mod is generated afresh (and go.sum removed).
	requires []string
	files    map[string][]byte // written into the module before `go get` (a main.go)
	get      []string          // the arguments of `go get`
	pkg      string            // what `go build` builds, in the module
	flags    []string          // of `go build`, which runs with CGO_ENABLED=0
}

// buildFromProxy builds m into out once per key in this process, unless out exists; the build
// module's directory is locked across processes.
func buildFromProxy(progress io.Writer, key, out string, m proxyModule) error {
	return onceBuilt(key, func() error {
		if !missing(out) {
			return nil
		}
		start := time.Now()
		dir := filepath.Join(CacheDir(), "src", m.dir)
		unlock, err := lockFile(dir + ".lock")
		if err != nil {
			return err
		}
		defer unlock()
		if !missing(out) {
			return nil
		}
		fmt.Fprintf(progress, "harness: generating the %s build module in %s\n", m.name, dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		old, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		for _, r := range m.requires {
			if err != nil || !strings.Contains(string(old), r) {
				gomod := "// Generated by nodeaddr's test harness (test/harness/build.go).\nmodule " + m.module + "\n\ngo 1.24.0\n"
				if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
					return err
				}
				os.Remove(filepath.Join(dir, "go.sum"))
				break
			}
		}
		for name, data := range m.files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				return err
			}
		}
		fmt.Fprintf(progress, "harness: go get %s in %s\n", strings.Join(m.get, " "), dir)
		get := exec.Command("go", append([]string{"get"}, m.get...)...)
		get.Dir = dir
		if b, err := get.CombinedOutput(); err != nil {
			return fmt.Errorf("go get %s: %v\n%s", strings.Join(m.get, " "), err, b)
		}
		fmt.Fprintf(progress, "harness: module download took %s\n", time.Since(start).Round(time.Second))
		if err := goBuild(progress, dir, m.pkg, out, []string{"CGO_ENABLED=0"}, m.flags...); err != nil {
			return err
		}
		fmt.Fprintf(progress, "harness: %s ready in %s (module download and build)\n", m.name, time.Since(start).Round(time.Second))
		return nil
	})
}
