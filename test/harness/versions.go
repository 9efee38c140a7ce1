package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// MatrixVersions are the kube-apiserver releases the version matrix (test/matrix) runs against,
// oldest first: the oldest supported minor, one in between, and KubernetesVersion. The newest patch
// of each minor the Go module proxy serves. Both older releases build with Go 1.26 unchanged.
// Raising the minimum (e.g. to 1.31 for a policy using isIP()/cidr(), see test/matrix/cel_test.go)
// is this line, `make matrix-bins` and `cd test && go test ./matrix -update`.
var MatrixVersions = []string{"v1.30.14", "v1.33.13", KubernetesVersion}

// Only KubernetesVersion is built from test/go.mod. Every older release gets its own build module,
// generated into the cache directory: test/go.mod stays on one Kubernetes release.

var (
	releaseMu    sync.Mutex
	releaseBuilt = map[string]error{}
)

// ReleaseBinary is where the executable name (kube-apiserver or vaptypecheck) of version is cached.
func ReleaseBinary(version, name string) string {
	return filepath.Join(CacheDir(), "bin", version, name)
}

// BuildAPIServer builds (once, cached by version) kube-apiserver of the given release and returns
// its path. KubernetesVersion comes from Build (test/go.mod); other releases from a build module
// generated under the cache directory. A cold build of one release takes several minutes on 2
// cores; progress goes to progress.
func BuildAPIServer(progress io.Writer, version string) (string, error) {
	if version == KubernetesVersion {
		b, err := Build(progress)
		return b.APIServer, err
	}
	return buildRelease(progress, version, "kube-apiserver", ".")
}

// BuildTypeChecker builds (once, cached by version) test/cmd/vaptypecheck against the libraries of
// the given release: the policy type checker of that release's kube-controller-manager.
func BuildTypeChecker(progress io.Writer, version string) (string, error) {
	// Named after its source: a changed checker is rebuilt, not taken from the cache.
	src, err := os.ReadFile(filepath.Join(TestModuleDir(), "cmd", "vaptypecheck", "main.go"))
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("vaptypecheck-%08x", crc32.ChecksumIEEE(src))
	if version == KubernetesVersion {
		out := ReleaseBinary(version, name)
		return out, onceBuilt(version+"/"+name, func() error {
			if _, err := os.Stat(out); err == nil {
				return nil
			}
			return goBuild(progress, TestModuleDir(), "./cmd/vaptypecheck", out, nil)
		})
	}
	return buildRelease(progress, version, name, "./vaptypecheck")
}

// MustBuildAPIServer is BuildAPIServer for tests.
func MustBuildAPIServer(t testing.TB, version string) string {
	t.Helper()
	p, err := BuildAPIServer(os.Stderr, version)
	if err != nil {
		t.Fatalf("build kube-apiserver %s: %v", version, err)
	}
	return p
}

// onceBuilt runs build once per key in this process and remembers its result.
func onceBuilt(key string, build func() error) error {
	releaseMu.Lock()
	defer releaseMu.Unlock()
	if err, done := releaseBuilt[key]; done {
		return err
	}
	err := build()
	releaseBuilt[key] = err
	return err
}

// buildRelease builds package pkg of the generated build module of version into the cache.
func buildRelease(progress io.Writer, version, name, pkg string) (string, error) {
	out := ReleaseBinary(version, name)
	return out, onceBuilt(version+"/"+name, func() error {
		if _, err := os.Stat(out); err == nil {
			return nil
		}
		start := time.Now()
		dir := filepath.Join(CacheDir(), "src", "kube-apiserver-"+version)
		// The cache is shared by checkouts: one build per module at a time, and the binary may
		// have appeared while this one waited.
		unlock, err := lockFile(dir + ".lock")
		if err != nil {
			return err
		}
		defer unlock()
		if _, err := os.Stat(out); err == nil {
			return nil
		}
		fmt.Fprintf(progress, "harness: generating the build module for Kubernetes %s in %s\n", version, dir)
		if err := writeBuildModule(dir, version); err != nil {
			return err
		}
		fmt.Fprintf(progress, "harness: go mod tidy in %s (downloads %s's dependencies)\n", dir, version)
		tidy := exec.Command("go", "mod", "tidy")
		tidy.Dir = dir
		if b, err := tidy.CombinedOutput(); err != nil {
			return fmt.Errorf("go mod tidy for Kubernetes %s: %v\n%s", version, err, b)
		}
		if err := goBuild(progress, dir, pkg, out, nil); err != nil {
			return err
		}
		fmt.Fprintf(progress, "harness: %s %s ready in %s (module download and build)\n", name, version,
			time.Since(start).Round(time.Second))
		return nil
	})
}

// stagingReplace matches a staging module's replace line in k8s.io/kubernetes' own go.mod.
var stagingReplace = regexp.MustCompile(`(?m)^\s*(k8s\.io/[A-Za-z0-9._-]+)\s+=>\s+\./staging/`)

// StagingModules lists the k8s.io staging modules of a kubernetes release, read from that
// release's go.mod (the list differs from minor to minor).
func StagingModules(version string) ([]string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+version)
	cmd.Dir = os.TempDir() // outside any module: test/go.mod is not touched
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download k8s.io/kubernetes@%s: %v", version, err)
	}
	var m struct{ GoMod, Error string }
	if err := json.Unmarshal(b, &m); err != nil || m.GoMod == "" {
		return nil, fmt.Errorf("go mod download k8s.io/kubernetes@%s: %v %s", version, err, m.Error)
	}
	gomod, err := os.ReadFile(m.GoMod)
	if err != nil {
		return nil, err
	}
	var mods []string
	for _, sm := range stagingReplace.FindAllSubmatch(gomod, -1) {
		mods = append(mods, string(sm[1]))
	}
	if len(mods) == 0 {
		return nil, fmt.Errorf("k8s.io/kubernetes@%s: no staging replace lines in %s", version, m.GoMod)
	}
	return mods, nil
}

// writeBuildModule writes go.mod (k8s.io/kubernetes at version, every staging module replaced by
// its v0.<minor>.<patch> release) and main.go into dir.
func writeBuildModule(dir, version string) error {
	mods, err := StagingModules(version)
	if err != nil {
		return err
	}
	var gomod bytes.Buffer
	fmt.Fprintf(&gomod, "// Generated by nodeaddr's test harness (test/harness/versions.go).\n"+
		"module nodeaddr.test/kube-apiserver\n\ngo 1.22.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", version)
	staging := "v0" + version[2:] // v1.30.14 -> v0.30.14
	for _, m := range mods {
		fmt.Fprintf(&gomod, "\t%s => %s %s\n", m, m, staging)
	}
	gomod.WriteString(")\n")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if old, err := os.ReadFile(filepath.Join(dir, "go.mod")); err != nil || !sameRequire(old, gomod.Bytes()) {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), gomod.Bytes(), 0o644); err != nil {
			return err
		}
	}
	// The mains are test/cmd's: kube-apiserver at the root, vaptypecheck below.
	for src, dst := range map[string]string{"kube-apiserver": "main.go", "vaptypecheck": "vaptypecheck/main.go"} {
		main, err := os.ReadFile(filepath.Join(TestModuleDir(), "cmd", src, "main.go"))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, dst)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, dst), main, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// sameRequire reports whether a go.mod written earlier (and tidied since) holds the generated
// require and replace lines: then it is kept with its go.sum.
func sameRequire(old, gen []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(gen))
	for sc.Scan() {
		l := bytes.TrimSpace(sc.Bytes())
		if bytes.Contains(l, []byte("=>")) && !bytes.Contains(old, l) {
			return false
		}
	}
	return true
}

// lockFile takes an exclusive advisory lock on file (created if needed) and returns its release.
func lockFile(file string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", file, err)
	}
	return func() { f.Close() }, nil
}
