package rehearsal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// `make image REGISTRY=... PLATFORMS=linux/amd64` builds the image with `make release`'s builder
// and pushes it, unsigned, to a real registry (HTTPS, a test CA), and prints the digest, a
// kustomize line and a Helm line: the digest is the pushed index's, which holds linux/amd64 alone,
// each its own binary with the Dockerfile's final stage; no signature is pushed; the kustomize
// overlay and the Helm values it prints name the pushed image by digest (the chart of a -dev
// version renders then, as it refuses its own default image). Without REGISTRY it exits 2 and
// says what to set.
func TestMakeImage(t *testing.T) {
	mk := harness.Tool(t, "make", "make")
	tools := harness.MustBuildReleaseTools(t)
	helm := harness.MustBuildHelm(t)
	kubectl := harness.MustBuild(t).Kubectl
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "registry"), 0o755); err != nil {
		t.Fatal(err)
	}
	reg := startRegistry(t, tools.Registry, filepath.Join(dir, "registry"))
	u := newUser(t, dir, reg)

	// No registry: a usage error (exit 2) naming REGISTRY, before anything is built.
	cmd := exec.Command(mk, "-s", "-C", harness.RepoDir(), "image", "REGISTRY=")
	cmd.Env = u.env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "set REGISTRY=HOST/PATH") {
		t.Errorf("make image without REGISTRY: %v, want exit status 2 and a message naming REGISTRY=HOST/PATH:\n%s", err, out)
	}

	registryPath := reg.Host + "/mine"
	imageDir := filepath.Join(dir, "image")
	version := strings.Fields(u.run(t, mk, "-s", "-C", harness.RepoDir(), "version"))
	printed := u.run(t, mk, "-s", "-C", harness.RepoDir(), "image", "REGISTRY="+registryPath, "PLATFORMS=linux/amd64",
		"IMAGE_DIR="+imageDir, "REVISION="+version[1])
	t.Logf("make image printed:\n%s", printed)
	line := func(prefix string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `(.+)$`).FindStringSubmatch(printed)
		if m == nil {
			t.Fatalf("make image printed no %q line:\n%s", prefix, printed)
		}
		return m[1]
	}
	digest := line("digest: ")
	image := registryPath + "/nodeaddr"
	ref := image + "@" + digest

	// The pushed index: the digest printed, linux/amd64 alone, the Dockerfile's final stage.
	pub := published{Image: ref, Registry: registryPath, Version: version[0], Revision: version[1], Dist: imageDir}
	idx := pushedIndex(t, reg, ref)
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Platform == nil || m.Manifests[0].Platform.Architecture != "amd64" {
		t.Errorf("PLATFORMS=linux/amd64: the index holds %+v", m.Manifests)
	}
	stage := readDockerfileStage(t, harness.RepoDir(), pub.Revision)
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != stage.User || !slices.Equal(cfg.Config.Entrypoint, stage.Entrypoint) {
		t.Errorf("config: user %q, entrypoint %q; the Dockerfile: %q, %q", cfg.Config.User, cfg.Config.Entrypoint, stage.User, stage.Entrypoint)
	}
	// Tagged VERSION, and nothing else: no cosign signature or attestation tag (sha256-….sig/.att).
	repo, err := name.NewRepository(image)
	if err != nil {
		t.Fatal(err)
	}
	tags, err := remote.List(repo, remote.WithTransport(reg.Client.Transport))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tags, []string{pub.Version}) {
		t.Errorf("tags of %s: %q, want only %s (unsigned)", image, tags, pub.Version)
	}

	// The kustomize line applies an overlay of deploy/ that names the pushed image by digest.
	k := line("kustomize: kubectl apply -k ")
	overlay := k
	if !filepath.IsAbs(overlay) {
		overlay = filepath.Join(harness.RepoDir(), overlay)
	}
	rendered := harness.Run(t, "", kubectl, "kustomize", overlay)
	if want := "image: " + ref + "\n"; !strings.Contains(rendered, want) {
		t.Errorf("kubectl kustomize %s does not render %q", overlay, strings.TrimSpace(want))
	}

	// The Helm line renders the pushed image pinned by digest.
	h := line("helm: ")
	fields := strings.Fields(h)
	if len(fields) < 4 || strings.Join(fields[:4], " ") != "helm install nodeaddr deploy/helm/nodeaddr" {
		t.Fatalf("the Helm line %q is not helm install nodeaddr deploy/helm/nodeaddr ...", h)
	}
	args := append([]string{"template"}, fields[2:]...)
	tmpl := exec.Command(helm, args...)
	tmpl.Dir, tmpl.Env = harness.RepoDir(), u.env
	chart, err := tmpl.Output()
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	var ds struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct{ Image string } `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	for _, doc := range strings.Split(string(chart), "\n---\n") {
		if strings.Contains(doc, "\nkind: DaemonSet\n") {
			if err := yaml.Unmarshal([]byte(doc), &ds); err != nil {
				t.Fatal(err)
			}
		}
	}
	if c := ds.Spec.Template.Spec.Containers; len(c) == 0 || c[0].Image != fmt.Sprintf("%s:%s@%s", image, pub.Version, digest) {
		t.Errorf("the Helm line renders the DaemonSet image %+v, want %s:%s@%s", c, image, pub.Version, digest)
	}
}
