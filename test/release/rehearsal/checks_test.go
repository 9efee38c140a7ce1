package rehearsal

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// verifySignatures checks as a user would, with cosign and the public key only: the image's
// signature, the SBOM attestation (a CycloneDX document about this index that lists the agent's
// modules) and the chart's signature; and that another key's verification fails.
func verifySignatures(t *testing.T, u *user, cosign string, pub published, key, otherKey string) {
	// The rehearsal has no transparency log: the signatures carry no inclusion proof to check.
	offline := []string{"--key", key, "--insecure-ignore-tlog=true"}
	digest := pub.Image[strings.Index(pub.Image, "@")+1:]
	out := u.run(t, cosign, append(append([]string{"verify"}, offline...), pub.Image)...)
	if !strings.Contains(out, `"docker-manifest-digest":"`+digest+`"`) {
		t.Errorf("cosign verify printed no claim for %s:\n%s", digest, out)
	}
	out = u.run(t, cosign, append(append([]string{"verify-attestation", "--type", "cyclonedx"}, offline...), pub.Image)...)
	checkSBOMAttestation(t, out, digest)
	u.run(t, cosign, append(append([]string{"verify"}, offline...), pub.Chart)...)
	if _, err := u.try(cosign, "verify", "--key", otherKey, "--insecure-ignore-tlog=true", pub.Image); err == nil {
		t.Errorf("cosign verify with another key accepted %s", pub.Image)
	}
}

// checkSBOMAttestation reads cosign verify-attestation's output: DSSE envelopes whose payload is
// an in-toto statement.
func checkSBOMAttestation(t *testing.T, out, digest string) {
	t.Helper()
	found := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var env struct{ PayloadType, Payload string }
		if json.Unmarshal(sc.Bytes(), &env) != nil || env.Payload == "" {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatalf("attestation payload: %v", err)
		}
		var st struct {
			PredicateType string `json:"predicateType"`
			Subject       []struct{ Digest map[string]string }
			Predicate     struct {
				BOMFormat  string `json:"bomFormat"`
				Components []struct{ Name, Version string }
			}
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatalf("in-toto statement: %v", err)
		}
		found = true
		if st.PredicateType != "https://cyclonedx.org/bom" || st.Predicate.BOMFormat != "CycloneDX" {
			t.Errorf("attestation predicate %q, format %q: want a CycloneDX BOM", st.PredicateType, st.Predicate.BOMFormat)
		}
		if len(st.Subject) != 1 || "sha256:"+st.Subject[0].Digest["sha256"] != digest {
			t.Errorf("attestation subjects %+v, want the index %s", st.Subject, digest)
		}
		if !slices.ContainsFunc(st.Predicate.Components, func(c struct{ Name, Version string }) bool {
			return c.Name == "github.com/vishvananda/netlink"
		}) {
			t.Errorf("the SBOM does not list github.com/vishvananda/netlink (%d components)", len(st.Predicate.Components))
		}
	}
	if !found {
		t.Errorf("cosign verify-attestation printed no attestation:\n%s", tail(out, 2000))
	}
}

// pushedIndex reads the pushed index as a user's client would (HTTPS with the registry's CA).
func pushedIndex(t *testing.T, reg *registry, ref string) v1.ImageIndex {
	t.Helper()
	d, err := name.NewDigest(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(d, remote.WithTransport(reg.Client.Transport))
	if err != nil {
		t.Fatalf("read %s: %v", ref, err)
	}
	return idx
}

// checkIndex: two platforms, each image's config naming its platform, and config and files equal
// to the Dockerfile's final stage; each binary is `make build`'s and prints the release's version.
func checkIndex(t *testing.T, reg *registry, pub published) {
	idx := pushedIndex(t, reg, pub.Image)
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	stage := readDockerfileStage(t, harness.RepoDir(), pub.Revision)
	if stage.Base != "scratch" {
		t.Fatalf("the Dockerfile's final stage is FROM %s; the release image is built on scratch", stage.Base)
	}
	var platforms []string
	for _, desc := range m.Manifests {
		p := desc.Platform.OS + "/" + desc.Platform.Architecture
		platforms = append(platforms, p)
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.OS+"/"+cfg.Architecture != p {
			t.Errorf("%s: the config says %s/%s", p, cfg.OS, cfg.Architecture)
		}
		if cfg.Config.User != stage.User || !slices.Equal(cfg.Config.Entrypoint, stage.Entrypoint) ||
			fmt.Sprint(cfg.Config.Labels) != fmt.Sprint(stage.Labels) || len(cfg.Config.Env) != 0 || len(cfg.Config.Cmd) != 0 {
			t.Errorf("%s config: user %q, entrypoint %q, labels %v, env %q, cmd %q; the Dockerfile: user %q, entrypoint %q, labels %v, no env, no cmd",
				p, cfg.Config.User, cfg.Config.Entrypoint, cfg.Config.Labels, cfg.Config.Env, cfg.Config.Cmd,
				stage.User, stage.Entrypoint, stage.Labels)
		}
		files := imageFiles(t, img)
		var names []string
		for n := range files {
			names = append(names, "/"+n)
		}
		if !slices.Equal(names, stage.Files) {
			t.Errorf("%s files %q, the Dockerfile copies %q", p, names, stage.Files)
		}
		built, err := os.ReadFile(filepath.Join(pub.Dist, "bin", "nodeaddr-"+strings.ReplaceAll(p, "/", "-")))
		if err != nil || !bytes.Equal(built, files["nodeaddr"]) {
			t.Errorf("%s: /nodeaddr is not make build's binary (%v)", p, err)
		}
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("index platforms %q, want linux/amd64 and linux/arm64", platforms)
	}
}

// imageFiles returns the regular files of img's layers (root-owned, mode 0755, or the test fails).
func imageFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Uid != 0 || h.Gid != 0 || h.Mode&0o777 != 0o755 {
				t.Errorf("%s: uid %d gid %d mode %o, want root-owned 0755 as COPY leaves it", h.Name, h.Uid, h.Gid, h.Mode)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = data
		}
		rc.Close()
	}
	return files
}

// platformBinary writes /nodeaddr of the pushed image's platform into dir and returns its path.
func platformBinary(t *testing.T, reg *registry, pub published, arch, dir string) string {
	t.Helper()
	idx := pushedIndex(t, reg, pub.Image)
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, desc := range m.Manifests {
		if desc.Platform.Architecture != arch {
			continue
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "nodeaddr-"+arch)
		if err := os.WriteFile(p, imageFiles(t, img)["nodeaddr"], 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Fatalf("no linux/%s image in %s", arch, pub.Image)
	return ""
}

// runArm64 runs the arm64 binary under qemu-aarch64-static (no binfmt registration): --version,
// then --dry-run --run-once in a network namespace with a dual-stack uplink, where it must
// preview the uplink's addresses as InternalIPs, as the amd64 binary does.
func runArm64(t *testing.T, reg *registry, pub published) {
	qemu := harness.Tool(t, "qemu-aarch64-static", "qemu-user-static")
	bin := platformBinary(t, reg, pub, "arm64", t.TempDir())
	want := fmt.Sprintf("nodeaddr %s (revision %s)\n", pub.Version, pub.Revision)
	out, err := exec.Command(qemu, bin, "--version").CombinedOutput()
	if err != nil || string(out) != want {
		t.Fatalf("qemu-aarch64-static nodeaddr --version: %v, printed %q, want %q", err, out, want)
	}
	harness.RequireE2E(t)
	ns := harness.NewNetns(t, "arm")
	router := harness.NewNetns(t, "rtr")
	harness.DualStackUplink(ns, router)
	cmd := ns.Exec(qemu, bin, "--dry-run", "--run-once", "--node-name=arm64", "--timeout=60s")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan struct{})
	time.AfterFunc(2*time.Minute, func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
		}
	})
	out, err = cmd.Output()
	close(done)
	if err != nil {
		t.Fatalf("arm64 nodeaddr --dry-run --run-once: %v\n%s", err, stderr.String())
	}
	if got := previewedAddresses(t, string(out)); got != "InternalIP=192.0.2.10 InternalIP=2001:db8::10" {
		t.Errorf("arm64 dry run previewed %q, want InternalIP=192.0.2.10 InternalIP=2001:db8::10\n%s", got, stderr.String())
	}
}

// previewedAddresses is the last {"addresses": [...]} line of a dry run, as "Type=address ...".
func previewedAddresses(t *testing.T, out string) string {
	t.Helper()
	got := ""
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, `{"addresses"`) {
			continue
		}
		var line struct {
			Addresses []struct{ Type, Address string }
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, a := range line.Addresses {
			parts = append(parts, a.Type+"="+a.Address)
		}
		got = strings.Join(parts, " ")
	}
	return got
}

// installChart pulls the chart the release signed (same digest) and installs it from the registry
// into a real kube-apiserver, with the image repository set to the pushed one. The API server
// has no nodes, so the DaemonSet schedules no pod: this proves the published chart renders,
// passes its kubeVersion and schema checks and that the API server admits every object;
// runPulledOnRealNode runs the pushed image on a real node, pulled from here.
func installChart(t *testing.T, u *user, helm string, pub published) {
	chart := "oci://" + pub.Registry + "/charts/nodeaddr"
	chartDigest := pub.Chart[strings.Index(pub.Chart, "@")+1:]
	pullDir := t.TempDir()
	pulled := u.runCombined(t, helm, "pull", chart, "--version", pub.Version, "--destination", pullDir)
	if !strings.Contains(pulled, "Digest: "+chartDigest) {
		t.Errorf("helm pull got a chart other than the signed %s:\n%s", chartDigest, pulled)
	}
	cp := harness.StartControlPlane(t)
	kc := harness.Kubeconfig(t, t.TempDir(), fmt.Sprintf("https://127.0.0.1:%d", cp.Port), cp.AdminToken)
	// The chart cannot pin a digest yet: image.tag also becomes the app.kubernetes.io/version label
	// of every object (templates/_helpers.tpl), and a label cannot hold "@sha256:...", so
	// --set image.tag=VERSION@DIGEST fails every object. It installs the tag whose digest was
	// verified; pinning with Helm needs an image.digest value in the chart.
	u.run(t, helm, "install", "nodeaddr", chart, "--version", pub.Version, "-n", "kube-system", "--kubeconfig", kc,
		"--set", "image.repository="+pub.Registry+"/nodeaddr")
	ds, err := cp.Admin.AppsV1().DaemonSets("kube-system").Get(t.Context(), "nodeaddr", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart installed no DaemonSet nodeaddr: %v", err)
	}
	want := pub.Registry + "/nodeaddr:" + pub.Version
	if got := ds.Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("DaemonSet image %q, want %q", got, want)
	}
}

// applyPinnedOverlay applies, with kubectl to a real API server, an overlay of the kustomize base
// that pins the pushed image by digest (docs/install.md, The image): the DaemonSet then names
// REGISTRY/nodeaddr@DIGEST.
func applyPinnedOverlay(t *testing.T, pub published) {
	kubectl := harness.MustBuild(t).Kubectl
	overlay := pinnedOverlay(t, pub, "")
	cp := harness.StartControlPlane(t)
	kc := harness.Kubeconfig(t, t.TempDir(), fmt.Sprintf("https://127.0.0.1:%d", cp.Port), cp.AdminToken)
	harness.Run(t, "", kubectl, "--kubeconfig", kc, "apply", "--server-side", "-k", overlay)
	ds, err := cp.Admin.AppsV1().DaemonSets("kube-system").Get(t.Context(), "nodeaddr", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the overlay applied no DaemonSet nodeaddr: %v", err)
	}
	if got, want := ds.Spec.Template.Spec.Containers[0].Image, pinnedImage(pub); got != want {
		t.Errorf("DaemonSet image %q, want %q", got, want)
	}
}

// pinnedImage is the pushed image as the pinned overlay names it: REGISTRY/nodeaddr@DIGEST.
func pinnedImage(pub published) string {
	return pub.Registry + "/nodeaddr@" + pub.Image[strings.Index(pub.Image, "@")+1:]
}

// pinnedOverlay writes a kustomize overlay of the shipped base that pins the pushed image by
// digest (docs/install.md, The image), with more kustomization lines appended (patches), and
// returns its directory.
func pinnedOverlay(t *testing.T, pub published, more string) string {
	t.Helper()
	var base struct {
		Images []struct{ Name string } `json:"images"`
	}
	b, err := os.ReadFile(filepath.Join(harness.RepoDir(), "deploy", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &base); err != nil || len(base.Images) != 1 {
		t.Fatalf("deploy/kustomization.yaml images: %v (%+v)", err, base.Images)
	}
	digest := pub.Image[strings.Index(pub.Image, "@")+1:]
	overlay := t.TempDir()
	// kustomize takes a base as a path relative to the overlay, never an absolute one.
	rel, err := filepath.Rel(overlay, filepath.Join(harness.RepoDir(), "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(overlay, "kustomization.yaml"), fmt.Sprintf(`resources:
  - %s
images:
  - name: %s
    newName: %s/nodeaddr
    digest: %s
`, rel, base.Images[0].Name, pub.Registry, digest)+more)
	return overlay
}
