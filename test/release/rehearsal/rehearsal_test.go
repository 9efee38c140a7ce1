// Package rehearsal runs `make release` against a real registry on loopback (distribution, over
// HTTPS with a test CA) and then checks what was published the way a user would: cosign verifies
// the image's signature and SBOM attestation and the chart's signature with the public key, the
// index has one image per platform matching the Dockerfile's final stage, the arm64 binary runs
// (under qemu), the chart installs from the registry into a real API server, and a real node's
// containerd pulls the image by digest from the registry and runs it. test/run-e2e runs
// it after the background build of its tools (cosign, cyclonedx-gomod, the registry).
package rehearsal

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }

// published is what `make release` pushed and wrote.
type published struct {
	Image, Chart      string // REPO@sha256:...
	Registry, Version string
	Revision          string
	Dist              string
}

// user is the environment of the release and of the user checking it: a throwaway home, Docker
// and Helm configuration, and the system's CA bundle plus the registry's CA.
type user struct {
	env []string
	dir string
}

func newUser(t *testing.T, dir string, reg *registry) *user {
	t.Helper()
	system, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	ca, err := os.ReadFile(reg.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "ca-bundle.pem")
	writeFile(t, bundle, string(system)+"\n"+string(ca))
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".docker"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An empty Docker config: the rehearsal registry needs no login (the workflow's `docker
	// login` writes this file; the release tool's image push, cosign and helm all read it).
	writeFile(t, filepath.Join(home, ".docker", "config.json"), "{}\n")
	// The go command's caches stay where they are: a fresh HOME would move them into it, and
	// make release would download and compile everything again.
	env := append(os.Environ(), goEnv(t, "GOPATH"), goEnv(t, "GOMODCACHE"), goEnv(t, "GOCACHE"), "HOME="+home, "DOCKER_CONFIG="+filepath.Join(home, ".docker"),
		"SSL_CERT_FILE="+bundle, "TUF_ROOT="+filepath.Join(home, "sigstore"),
		"HELM_CACHE_HOME="+filepath.Join(home, "helm-cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(home, "helm-data"), "COSIGN_PASSWORD=rehearsal")
	return &user{env: env, dir: dir}
}

// goEnv is NAME=value of `go env NAME`.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return name + "=" + strings.TrimSpace(string(out))
}

// run runs name in the user's environment and returns its stdout; it fails t with the output on
// error.
func (u *user) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := u.try(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out
}

// runCombined is run returning stdout and stderr together (helm prints "Digest:" on stderr).
func (u *user) runCombined(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env, cmd.Dir = u.env, u.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, tail(string(out), 6000))
	}
	return string(out)
}

// try runs name in the user's environment and returns its stdout, or an error with the end of
// its output.
func (u *user) try(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env, cmd.Dir = u.env, u.dir
	var stdout, both strings.Builder
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&stdout, &both), &both
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\n%s", err, tail(both.String(), 6000))
	}
	return stdout.String(), nil
}

func TestReleaseRehearsal(t *testing.T) {
	mk := harness.Tool(t, "make", "make")
	tools := harness.MustBuildReleaseTools(t)
	helm := harness.MustBuildHelm(t)
	dir := t.TempDir()
	for _, d := range []string{"registry", "keys", "other-keys", "dist"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	reg := startRegistry(t, tools.Registry, filepath.Join(dir, "registry"))
	u := newUser(t, dir, reg)

	// The maintainer's key pair (the workflow signs keyless instead: the same commands without
	// --key), and a signing config naming no transparency log or timestamp authority: nothing
	// leaves the machine.
	u.dir = filepath.Join(dir, "keys")
	u.run(t, tools.Cosign, "generate-key-pair")
	u.dir = filepath.Join(dir, "other-keys")
	u.run(t, tools.Cosign, "generate-key-pair")
	u.dir = dir
	signingConfig, trustedRoot := filepath.Join(dir, "signing-config.json"), filepath.Join(dir, "trusted-root.json")
	writeFile(t, signingConfig, offlineSigningConfig)
	writeFile(t, trustedRoot, `{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`+"\n")

	pub := releaseOnce(t, u, mk, reg, helm, tools, filepath.Join(dir, "keys", "cosign.key"), signingConfig, trustedRoot)
	t.Logf("published %s and %s", pub.Image, pub.Chart)

	t.Run("cosign verifies the image, its SBOM attestation and the chart with the public key", func(t *testing.T) {
		verifySignatures(t, u, tools.Cosign, pub, filepath.Join(dir, "keys", "cosign.pub"), filepath.Join(dir, "other-keys", "cosign.pub"))
	})
	t.Run("the index has linux/amd64 and linux/arm64, each the Dockerfile's final stage", func(t *testing.T) {
		checkIndex(t, reg, pub)
	})
	t.Run("the plugin's archives (linux and darwin) and the krew manifest carry their checksums", func(t *testing.T) {
		checkPluginAssets(t, pub)
	})
	t.Run("the arm64 binary of the pushed image runs under qemu-aarch64-static", func(t *testing.T) {
		runArm64(t, reg, pub)
	})
	t.Run("helm installs the chart it pulls from the registry, the signed digest", func(t *testing.T) {
		installChart(t, u, helm, pub)
	})
	t.Run("kubectl applies the kustomize base with the image pinned by digest", func(t *testing.T) {
		applyPinnedOverlay(t, pub)
	})
	t.Run("a real node pulls the pinned image from the registry and nodeaddr initializes its Node", func(t *testing.T) {
		runPulledOnRealNode(t, reg, pub)
	})
}

// offlineSigningConfig is a Sigstore signing config (v0.2) with no services: cosign signs with the
// key and uploads nothing (the rehearsal has no transparency log; the workflow uses the public
// instance's config, which cosign fetches itself). With the empty trusted root beside it cosign
// does not look for the public instance's root either (without it, it tries to resolve the TUF
// repository's name, which is traffic off this machine).
const offlineSigningConfig = `{
  "mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json",
  "caUrls": [], "oidcUrls": [], "rekorTlogUrls": [], "tsaUrls": [],
  "rekorTlogConfig": {"selector": "ANY"}, "tsaConfig": {"selector": "ANY"}
}
`

// releaseOnce runs `make release` as the workflow does, with the registry, the key and the tools
// from the environment.
func releaseOnce(t *testing.T, u *user, mk string, reg *registry, helm string, tools harness.ReleaseTools, key, signingConfig, trustedRoot string) published {
	t.Helper()
	dist := filepath.Join(u.dir, "dist")
	registryPath := reg.Host + "/nodeaddr"
	// The version and revision `make release` stamps, read first: a commit landing while it runs
	// (a developer's checkout) must not change what the checks expect.
	version := strings.Fields(u.run(t, mk, "-s", "-C", harness.RepoDir(), "version"))
	u.run(t, mk, "-C", harness.RepoDir(), "release", "REGISTRY="+registryPath, "DIST_DIR="+dist,
		"REVISION="+version[1],
		"COSIGN_KEY="+key, "COSIGN_SIGNING_CONFIG="+signingConfig, "COSIGN_TRUSTED_ROOT="+trustedRoot,
		"COSIGN="+tools.Cosign, "CYCLONEDX_GOMOD="+tools.CycloneDX, "HELM="+helm)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	return published{Image: read("image"), Chart: read("chart"), Registry: registryPath,
		Version: version[0], Revision: version[1], Dist: dist}
}
