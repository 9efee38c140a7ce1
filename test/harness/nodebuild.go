package harness

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Versions of the real node's components, all built from the Go module proxy (nothing can be
// pulled here). Kubernetes 1.36+ needs containerd 2.x; runc is built with cgo and Debian's
// libseccomp-dev so that RuntimeDefault seccomp is really applied.
const (
	ContainerdVersion = "v2.4.2"
	RuncVersion       = "v1.5.3"
	CNIPluginsVersion = "v1.10.0"
)

// NodeBinaries are the executables of a real node: the kubelet and the controllers that make it a
// cluster node, the container runtime, and the CNI plugins (in CNIDir, as containerd expects).
type NodeBinaries struct {
	Kubelet, ControllerManager, Scheduler string
	// KubeProxy runs as a host process in the node's namespace (the NodePort scenario).
	KubeProxy                   string
	Containerd, Shim, Ctr, Runc string
	CNIDir                      string
	// Pause is the sandbox image's static binary (test/cmd/pause); Webpod the ordinary pod's
	// (test/cmd/webpod: logs, exec, HTTP).
	Pause, Webpod string
}

var (
	nodeBuildOnce sync.Once
	nodeBuilt     NodeBinaries
	nodeBuildErr  error
)

// goInstall is one `go install PKG@VERSION` group whose binaries land in dir.
type goInstall struct {
	dir   string
	env   []string
	tags  string
	pkgs  []string
	names []string
}

// BuildNode builds (or reuses, keyed by version in the cache) everything a real node runs. Cold, it
// took about 12 minutes on 2 busy cores; progress goes to progress.
func BuildNode(progress io.Writer) (NodeBinaries, error) {
	nodeBuildOnce.Do(func() { nodeBuilt, nodeBuildErr = buildNode(progress) })
	return nodeBuilt, nodeBuildErr
}

func buildNode(progress io.Writer) (NodeBinaries, error) {
	bin := filepath.Join(CacheDir(), "bin")
	k8s := k8sBinDir()
	ctrd := filepath.Join(bin, "containerd-"+ContainerdVersion)
	nb := NodeBinaries{
		Kubelet:           filepath.Join(k8s, "kubelet"),
		ControllerManager: filepath.Join(k8s, "kube-controller-manager"),
		Scheduler:         filepath.Join(k8s, "kube-scheduler"),
		KubeProxy:         filepath.Join(k8s, "kube-proxy"),
		Containerd:        filepath.Join(ctrd, "containerd"),
		Shim:              filepath.Join(ctrd, "containerd-shim-runc-v2"),
		Ctr:               filepath.Join(ctrd, "ctr"),
		Runc:              filepath.Join(bin, "runc-"+RuncVersion, "runc"),
		CNIDir:            filepath.Join(bin, "cni-"+CNIPluginsVersion),
		Pause:             filepath.Join(bin, "pause"),
		Webpod:            filepath.Join(bin, "webpod"),
	}
	// The Kubernetes components share most packages: one `go build` compiles the missing ones once
	// (kube-proxy arrived later: a cache with the other three builds only it).
	var names []string
	for _, n := range []string{"kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
		if missing(filepath.Join(k8s, n)) {
			names = append(names, n)
		}
	}
	if len(names) > 0 {
		fmt.Fprintf(progress, "harness: building %s %s (cold: ~6 min on 2 cores)\n", strings.Join(names, ", "), KubernetesVersion)
		tmp := filepath.Join(k8s, fmt.Sprintf(".tmp%d", os.Getpid()))
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return nb, err
		}
		defer os.RemoveAll(tmp)
		args := append(append([]string{"build", "-v"}, k8sVersionFlags(KubernetesVersion)...), "-o", tmp+"/")
		for _, n := range names {
			args = append(args, "./cmd/"+n)
		}
		if err := runGo(progress, TestModuleDir(), "kubernetes node components", nil, args...); err != nil {
			return nb, err
		}
		if err := moveAll(tmp, k8s, names...); err != nil {
			return nb, err
		}
	}
	cni := "github.com/containernetworking/plugins/plugins/"
	for _, g := range []goInstall{
		{dir: ctrd, pkgs: []string{"github.com/containerd/containerd/v2/cmd/containerd", "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2", "github.com/containerd/containerd/v2/cmd/ctr"},
			names: []string{"containerd", "containerd-shim-runc-v2", "ctr"}, env: []string{"CGO_ENABLED=0"}},
		{dir: filepath.Dir(nb.Runc), pkgs: []string{"github.com/opencontainers/runc"}, names: []string{"runc"},
			env: []string{"CGO_ENABLED=1"}, tags: "seccomp"},
		{dir: nb.CNIDir, pkgs: []string{cni + "main/bridge", cni + "ipam/host-local", cni + "main/loopback", cni + "meta/portmap"},
			names: []string{"bridge", "host-local", "loopback", "portmap"}, env: []string{"CGO_ENABLED=0"}},
	} {
		if err := g.run(progress); err != nil {
			return nb, err
		}
	}
	// The pause and webpod binaries are tiny: always rebuilt, static.
	if err := goBuild(progress, TestModuleDir(), "./cmd/pause", nb.Pause, []string{"CGO_ENABLED=0"}); err != nil {
		return nb, err
	}
	return nb, goBuild(progress, TestModuleDir(), "./cmd/webpod", nb.Webpod, []string{"CGO_ENABLED=0"})
}

func (g goInstall) run(progress io.Writer) error {
	var paths []string
	for _, n := range g.names {
		paths = append(paths, filepath.Join(g.dir, n))
	}
	if !missing(paths...) {
		return nil
	}
	version := map[string]string{"github.com/containerd": ContainerdVersion, "github.com/opencontainers": RuncVersion,
		"github.com/containernetworking": CNIPluginsVersion}
	args := []string{"install", "-v", "-trimpath"}
	if g.tags != "" {
		args = append(args, "-tags", g.tags)
	}
	for _, p := range g.pkgs {
		for prefix, v := range version {
			if len(p) > len(prefix) && p[:len(prefix)] == prefix {
				p += "@" + v
			}
		}
		args = append(args, p)
	}
	tmp := filepath.Join(g.dir, fmt.Sprintf(".tmp%d", os.Getpid()))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(progress, "harness: go %v -> %s\n", args, g.dir)
	// Outside any module, so each tool builds with its own go.mod, as its release does.
	if err := runGo(progress, os.TempDir(), filepath.Base(g.dir), append(g.env, "GOBIN="+tmp, "GOFLAGS=-buildvcs=false"), args...); err != nil {
		return err
	}
	return moveAll(tmp, g.dir, g.names...)
}

// missing reports whether any of paths does not exist.
func missing(paths ...string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return true
		}
	}
	return false
}

// moveAll renames each name from src to dst, so a binary appears in the cache only once complete.
func moveAll(src, dst string, names ...string) error {
	for _, n := range names {
		if err := os.Rename(filepath.Join(src, n), filepath.Join(dst, n)); err != nil {
			return err
		}
	}
	return nil
}

// NodeVersions are the releases the real node's fresh-node scenario runs on, each as a whole
// cluster of that release (kube-apiserver, kube-controller-manager, kube-scheduler and kubelet):
// the newest, and the oldest supported minor (a 1.30 kubelet against a 1.37 API server is outside
// the supported version skew). containerd, runc and the CNI plugins are the same for both.
var NodeVersions = []string{MatrixVersions[0], KubernetesVersion}

// BuildNodeVersion is BuildNode with the kubelet, kube-controller-manager and kube-scheduler of
// version: KubernetesVersion's from test/go.mod, an older release's from its own generated build
// module (test/harness/versions.go), cached under bin/<version>/ and stamped with the version.
func BuildNodeVersion(progress io.Writer, version string) (NodeBinaries, error) {
	nb, err := BuildNode(progress)
	if err != nil || version == KubernetesVersion {
		return nb, err
	}
	err = buildReleaseModule(progress, version, nodeModule, map[string]string{
		"kubelet": "./kubelet", "kube-controller-manager": "./kube-controller-manager", "kube-scheduler": "./kube-scheduler"})
	nb.Kubelet = ReleaseBinary(version, "kubelet")
	nb.ControllerManager = ReleaseBinary(version, "kube-controller-manager")
	nb.Scheduler = ReleaseBinary(version, "kube-scheduler")
	return nb, err
}

// MustBuildNode is BuildNode for tests.
func MustBuildNode(t testing.TB) NodeBinaries {
	t.Helper()
	return mustBuild(t, "build node", BuildNode)
}
