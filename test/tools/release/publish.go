package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pushIndex pushes idx to image by digest (every manifest and blob first, the index last), then
// tags it version, and returns image@digest: what is signed and what users pin.
func pushIndex(ctx context.Context, image, version string, idx v1.ImageIndex) (string, error) {
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	ref, err := name.NewDigest(image + "@" + digest.String())
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	if err := remote.Tag(ref.Context().Tag(version), idx, opts...); err != nil {
		return "", fmt.Errorf("tag %s: %w", version, err)
	}
	return ref.String(), nil
}

// writeSBOM writes the CycloneDX SBOM of cmd/nodeaddr as the image's binary is built (linux, no
// cgo): its modules with versions, hashes and licenses, and the Go toolchain.
func writeSBOM(c config, out string) error {
	_, err := run(c.repo, []string{"GOOS=linux", "CGO_ENABLED=0"}, c.cyclonedx,
		"app", "-json", "-licenses", "-std", "-output", out, "-main", "cmd/nodeaddr", ".")
	return err
}

// cosignFlags select the signer: the key when one is given, keyless (the CI's OIDC identity,
// through Fulcio) otherwise; and the services to use (transparency log, timestamp authority).
func (c config) cosignFlags() []string {
	flags := []string{"--yes"}
	if c.cosignKey != "" {
		flags = append(flags, "--key", c.cosignKey)
	}
	if c.signingConfig != "" {
		flags = append(flags, "--signing-config", c.signingConfig)
	}
	if c.trustedRoot != "" {
		flags = append(flags, "--trusted-root", c.trustedRoot)
	}
	return flags
}

func (c config) sign(ref string) error {
	args := append(append([]string{"sign"}, c.cosignFlags()...), ref)
	_, err := run(c.repo, nil, c.cosign, args...)
	return err
}

func (c config) attest(ref, sbom string) error {
	args := append(append([]string{"attest"}, c.cosignFlags()...), "--type", "cyclonedx", "--predicate", sbom, ref)
	_, err := run(c.repo, nil, c.cosign, args...)
	return err
}

var chartDigestRE = regexp.MustCompile(`(?m)^Digest: (sha256:[0-9a-f]{64})$`)

// pushChart lints, packages (version and appVersion VERSION) and pushes the chart to
// oci://REGISTRY/charts, and returns REGISTRY/charts/nodeaddr@digest.
func (c config) pushChart() (string, error) {
	chart := filepath.Join(c.repo, "deploy", "helm", "nodeaddr")
	step("chart %s as oci://%s/charts/nodeaddr:%s", chart, c.registry, c.version)
	if _, err := run(c.repo, nil, c.helm, "lint", "--strict", chart); err != nil {
		return "", err
	}
	if _, err := run(c.repo, nil, c.helm, "package", chart, "--version", c.version,
		"--app-version", c.version, "--destination", c.dist); err != nil {
		return "", err
	}
	pkg := filepath.Join(c.dist, "nodeaddr-"+c.version+".tgz")
	out, err := run(c.repo, nil, c.helm, "push", pkg, "oci://"+c.registry+"/charts")
	if err != nil {
		return "", err
	}
	m := chartDigestRE.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("helm push printed no Digest: line:\n%s", out)
	}
	return c.registry + "/charts/nodeaddr@" + m[1], nil
}

// writeAssets writes notes.md (CHANGELOG.md's section of the version, or Unreleased for a
// development version, which only a rehearsal publishes) and SHA256SUMS of the files a GitHub
// release carries.
func writeAssets(c config, image, chart string) error {
	section := c.version
	if strings.HasSuffix(c.version, "-dev") {
		section = "Unreleased"
	}
	notes, err := run(c.repo, nil, filepath.Join(c.repo, ".github", "scripts", "changelog-section"), section,
		filepath.Join(c.repo, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	notes += fmt.Sprintf("\n## Artifacts\n\n"+
		"- Image: `%s` (tag `%s`), linux/amd64 and linux/arm64, signed with cosign, with a CycloneDX SBOM attestation\n"+
		"- Chart: `oci://%s` (`helm install nodeaddr oci://%s/charts/nodeaddr --version %s -n kube-system`), signed with cosign\n"+
		"- kubectl plugin: `kubectl-nodeaddr_v%s_OS_ARCH.tar.gz` below (linux and darwin, amd64 and arm64), SHA-256 sums in `SHA256SUMS`; the krew manifest `nodeaddr.yaml`\n",
		image, c.version, chart, c.registry, c.version, c.version)
	if err := os.WriteFile(filepath.Join(c.dist, "notes.md"), []byte(notes), 0o644); err != nil {
		return err
	}
	files := []string{"nodeaddr-" + c.version + ".cdx.json", "nodeaddr-" + c.version + ".tgz"}
	archives, err := writePluginArchives(c)
	if err != nil {
		return err
	}
	if err := writeKrewManifest(c); err != nil {
		return err
	}
	files = append(files, archives...)
	return writeSums(c.dist, files)
}

// writeSums writes dir/SHA256SUMS in sha256sum's format (`sha256sum -c SHA256SUMS` checks it).
func writeSums(dir string, files []string) error {
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), f)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

// run runs name with args in dir, its output going to stderr as it comes, and returns its stdout.
func run(dir string, env []string, name string, args ...string) (string, error) {
	fmt.Fprintf(os.Stderr, "+ %s %s\n", filepath.Base(name), strings.Join(args, " "))
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out strings.Builder
	cmd.Stdout = io.MultiWriter(&out, os.Stderr)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out.String(), nil
}
