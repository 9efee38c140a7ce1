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
	b, err := Build(os.Stderr)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return b
}
