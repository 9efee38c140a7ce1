package harness

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
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

// Minor is the minor number of a release "v1.MINOR.PATCH" (0 if it is not one).
func Minor(version string) int {
	var major, minor, patch int
	if _, err := fmt.Sscanf(version, "v%d.%d.%d", &major, &minor, &patch); err != nil {
		return 0
	}
	return minor
}

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

// releaseModule is one generated build module of an older release: the test/cmd mains it holds
// (source directory -> path inside the module) and what is built from it. The kube-apiserver
// module also holds the policy type checker; the node module holds the kubelet,
// kube-controller-manager and kube-scheduler, compiled by one `go build` (they share most
// packages). Each module has its own directory and lock: a node build does not hold up the matrix.
type releaseModule struct {
	name  string
	mains map[string]string
	// stamp: link the release's version into the binaries (the Node's kubeletVersion shows it).
	stamp bool
}

var (
	apiServerModule = releaseModule{name: "kube-apiserver", mains: map[string]string{
		"kube-apiserver": "main.go", "vaptypecheck": "vaptypecheck/main.go"}}
	nodeModule = releaseModule{name: "node", stamp: true, mains: map[string]string{
		"kubelet": "kubelet/main.go", "kube-controller-manager": "kube-controller-manager/main.go",
		"kube-scheduler": "kube-scheduler/main.go"}}
)

// buildRelease builds package pkg of the generated build module of version into the cache.
func buildRelease(progress io.Writer, version, name, pkg string) (string, error) {
	return ReleaseBinary(version, name), buildReleaseModule(progress, version, apiServerModule,
		map[string]string{name: pkg})
}

// buildReleaseModule builds each binary (name -> package) of module m at version into
// ReleaseBinary(version, name) with one `go build`, unless all are cached already.
func buildReleaseModule(progress io.Writer, version string, m releaseModule, bins map[string]string) error {
	var names, pkgs, outs []string
	for name := range bins {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pkgs, outs = append(pkgs, bins[name]), append(outs, ReleaseBinary(version, name))
	}
	return onceBuilt(version+"/"+strings.Join(names, ","), func() error {
		if !missing(outs...) {
			return nil
		}
		start := time.Now()
		dir := filepath.Join(CacheDir(), "src", m.name+"-"+version)
		// The cache is shared by checkouts: one build per module at a time, and the binaries may
		// have appeared while this one waited.
		unlock, err := lockFile(dir + ".lock")
		if err != nil {
			return err
		}
		defer unlock()
		if !missing(outs...) {
			return nil
		}
		fmt.Fprintf(progress, "harness: generating the %s build module for Kubernetes %s in %s\n", m.name, version, dir)
		if err := writeBuildModule(dir, version, m); err != nil {
			return err
		}
		fmt.Fprintf(progress, "harness: go mod tidy in %s (downloads %s's dependencies)\n", dir, version)
		tidy := exec.Command("go", "mod", "tidy")
		tidy.Dir = dir
		if b, err := tidy.CombinedOutput(); err != nil {
			return fmt.Errorf("go mod tidy for Kubernetes %s: %v\n%s", version, err, b)
		}
		if err := buildInto(progress, dir, version, m, names, pkgs); err != nil {
			return err
		}
		fmt.Fprintf(progress, "harness: %s %s ready in %s (module download and build)\n", strings.Join(names, ", "),
			version, time.Since(start).Round(time.Second))
		return nil
	})
}

// buildInto compiles pkgs of the module in dir with one `go build` into a temporary directory and
// moves the binaries (named after names) into the cache only when all are complete.
func buildInto(progress io.Writer, dir, version string, m releaseModule, names, pkgs []string) error {
	if len(pkgs) == 1 {
		return goBuild(progress, dir, pkgs[0], ReleaseBinary(version, names[0]), nil, stampFlags(m, version)...)
	}
	out := filepath.Dir(ReleaseBinary(version, names[0]))
	tmp := filepath.Join(out, fmt.Sprintf(".tmp%d", os.Getpid()))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(progress, "harness: building %s %s in %s (cold: several minutes on 2 cores)\n", strings.Join(names, ", "), version, dir)
	args := append(append([]string{"build", "-v"}, stampFlags(m, version)...), "-o", tmp+"/")
	if err := runGo(progress, dir, m.name+" "+version, nil, append(args, pkgs...)...); err != nil {
		return err
	}
	// `go build -o DIR/` names each binary after its package directory.
	for i, pkg := range pkgs {
		if err := os.Rename(filepath.Join(tmp, filepath.Base(pkg)), filepath.Join(out, names[i])); err != nil {
			return err
		}
	}
	return nil
}

func stampFlags(m releaseModule, version string) []string {
	if !m.stamp {
		return nil
	}
	return k8sVersionFlags(version)
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
// its v0.<minor>.<patch> release) and m's mains into dir.
func writeBuildModule(dir, version string, m releaseModule) error {
	mods, err := StagingModules(version)
	if err != nil {
		return err
	}
	var gomod bytes.Buffer
	fmt.Fprintf(&gomod, "// Generated by nodeaddr's test harness (test/harness/versions.go).\n"+
		"module nodeaddr.test/%s\n\ngo 1.22.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", m.name, version)
	staging := "v0" + version[2:] // v1.30.14 -> v0.30.14
	for _, mod := range mods {
		fmt.Fprintf(&gomod, "\t%s => %s %s\n", mod, mod, staging)
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
	// The mains are test/cmd's, the same source for every release.
	for src, dst := range m.mains {
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

// CheckLinks fails unless the binary bin links the release version: k8s.io/kubernetes at version
// and its staging module k8s.io/apiserver at v0.MINOR.PATCH. It proves which release a binary of
// the suite was built from (its --version says v0.0.0 unless the build stamped it).
func CheckLinks(bin, version string) error {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return err
	}
	want := map[string]string{"k8s.io/kubernetes": version, "k8s.io/apiserver": "v0" + version[2:]}
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		if w, ok := want[d.Path]; ok {
			if d.Version != w {
				return fmt.Errorf("%s links %s %s, want %s", bin, d.Path, d.Version, w)
			}
			delete(want, d.Path)
		}
	}
	if len(want) > 0 {
		return fmt.Errorf("%s does not link %v", bin, want)
	}
	return nil
}
