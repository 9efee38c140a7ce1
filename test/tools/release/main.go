// Command release publishes one nodeaddr release; `make release` runs it after `make build` has
// cross-compiled the binaries, and it is the only way a release is built (the workflow calls `make
// release`; test/release rehearses it against a registry on loopback). In order:
//
//  1. the OCI image index (linux/amd64 and linux/arm64, the Dockerfile's final stage: scratch, the
//     static binary, uid 65532) assembled with go-containerregistry, no container engine, no base
//     image; pushed by digest, then tagged VERSION;
//  2. a CycloneDX SBOM of cmd/nodeaddr (cyclonedx-gomod, from the Go module graph);
//  3. cosign signs the index by digest and attests the SBOM on it: keyless (OIDC) without -cosign-key,
//     with the key otherwise, the same commands either way;
//  4. the Helm chart packaged with VERSION, pushed as OCI and signed by digest;
//  5. dist/: the release notes (CHANGELOG.md's section), the SBOM, the kubectl-nodeaddr binaries and
//     their SHA-256 sums, for the GitHub release.
//
// With -image-only (`make image`) it does step 1 alone, unsigned, and prints how to install the image.
//
// Registry credentials come from the Docker config (`docker login`, or DOCKER_CONFIG), which Helm
// reads too (HELM_REGISTRY_CONFIG, unless already set). TLS roots are the system's (SSL_CERT_FILE).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type config struct {
	repo, dist, registry, version, revision string
	arches                                  []string
	created                                 time.Time
	cosign, cosignKey, signingConfig        string
	trustedRoot                             string
	helm, cyclonedx                         string
}

func main() {
	var c config
	var arches, created string
	flag.StringVar(&c.repo, "repo", "../..", "the repository's root")
	flag.StringVar(&c.dist, "dist", "", "where `make build` wrote the binaries (DIST/bin) and where the release's files go")
	flag.StringVar(&c.registry, "registry", "", "the repository prefix: the image goes to REGISTRY/nodeaddr, the chart to oci://REGISTRY/charts/nodeaddr")
	flag.StringVar(&c.version, "version", "", "the release's version (the VERSION file)")
	flag.StringVar(&c.revision, "revision", "", "the commit (the image's org.opencontainers.image.revision label)")
	flag.StringVar(&arches, "arches", "amd64,arm64", "linux architectures of the image index")
	flag.StringVar(&created, "created", "0", "the image's creation time in Unix seconds (the commit's time: same commit, same digest)")
	flag.StringVar(&c.cosign, "cosign", "cosign", "the cosign binary")
	flag.StringVar(&c.cosignKey, "cosign-key", "", "cosign's --key (a key file or KMS URI); empty: keyless, with the CI's OIDC token")
	flag.StringVar(&c.signingConfig, "signing-config", "", "cosign's --signing-config (the services it uses); empty: the public Sigstore instance's, from TUF")
	flag.StringVar(&c.trustedRoot, "trusted-root", "", "cosign's --trusted-root (what verifies those services' answers); empty: the public instance's, from TUF")
	flag.StringVar(&c.helm, "helm", "helm", "the helm binary")
	flag.StringVar(&c.cyclonedx, "cyclonedx-gomod", "cyclonedx-gomod", "the cyclonedx-gomod binary")
	imageOnly := flag.Bool("image-only", false, "`make image`: push only the image index (no SBOM, signature, chart or release files), "+
		"write DIST/image and DIST/kustomize/, and print the digest and the lines that install it")
	flag.Parse()
	c.arches = strings.Split(arches, ",")
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		fail(fmt.Errorf("-created %q: %w", created, err))
	}
	c.created = time.Unix(secs, 0).UTC()
	if c.dist == "" || c.registry == "" || c.version == "" || c.revision == "" {
		fail(fmt.Errorf("-dist, -registry, -version and -revision are required (make release sets them; REGISTRY from the environment)"))
	}
	if strings.Contains(c.registry, "://") || strings.HasSuffix(c.registry, "/") {
		fail(fmt.Errorf("REGISTRY %q: want HOST[:PORT]/PATH, without a scheme or a trailing slash", c.registry))
	}
	if *imageOnly {
		if err := publishImage(context.Background(), c, os.Stdout); err != nil {
			fail(err)
		}
		return
	}
	if err := release(context.Background(), c); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "== release: "+format+"\n", args...)
}

// buildAndPushIndex builds the image index of the binaries in DIST/bin for c.arches and pushes it
// to REGISTRY/nodeaddr, tagged VERSION: it returns that repository and the pushed reference
// (REPO@DIGEST).
func buildAndPushIndex(ctx context.Context, c config) (image, ref string, err error) {
	image = c.registry + "/nodeaddr"
	step("image index %s (%s) from %s", image, strings.Join(c.arches, ", "), filepath.Join(c.dist, "bin"))
	idx, err := imageIndex(filepath.Join(c.dist, "bin"), c.arches, c.revision, c.created)
	if err != nil {
		return "", "", err
	}
	ref, err = pushIndex(ctx, image, c.version, idx)
	return image, ref, err
}

func release(ctx context.Context, c config) error {
	if os.Getenv("HELM_REGISTRY_CONFIG") == "" {
		os.Setenv("HELM_REGISTRY_CONFIG", dockerConfigFile())
	}
	_, ref, err := buildAndPushIndex(ctx, c)
	if err != nil {
		return err
	}
	step("pushed %s (tag %s)", ref, c.version)
	sbom := filepath.Join(c.dist, "nodeaddr-"+c.version+".cdx.json")
	step("SBOM %s", sbom)
	if err := writeSBOM(c, sbom); err != nil {
		return err
	}
	step("signing %s and attesting its SBOM", ref)
	if err := c.sign(ref); err != nil {
		return err
	}
	if err := c.attest(ref, sbom); err != nil {
		return err
	}
	chartRef, err := c.pushChart()
	if err != nil {
		return err
	}
	step("signing the chart %s", chartRef)
	if err := c.sign(chartRef); err != nil {
		return err
	}
	step("release notes, plugin binaries and checksums in %s", c.dist)
	if err := writeAssets(c, ref, chartRef); err != nil {
		return err
	}
	// What was signed, for the workflow's summary and the rehearsal's checks.
	if err := os.WriteFile(filepath.Join(c.dist, "chart"), []byte(chartRef+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.dist, "image"), []byte(ref+"\n"), 0o644)
}

// dockerConfigFile is where `docker login` writes credentials ($DOCKER_CONFIG/config.json).
func dockerConfigFile() string {
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".docker")
	}
	return filepath.Join(dir, "config.json")
}
