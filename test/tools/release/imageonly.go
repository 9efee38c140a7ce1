package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// publishImage is `make image`: the release's image index (imageIndex, pushIndex: the same image
// `make release` pushes) built from the binaries in DIST/bin for c.arches and pushed to
// REGISTRY/nodeaddr, tagged VERSION, without SBOM, signature or chart. It writes DIST/image
// (REPO@DIGEST) and DIST/kustomize/, an overlay of deploy/ that pins the image, and prints to out
// the digest and the kustomize and Helm lines that install it.
func publishImage(ctx context.Context, c config, out io.Writer) error {
	image, ref, err := buildAndPushIndex(ctx, c)
	if err != nil {
		return err
	}
	digest := ref[strings.LastIndex(ref, "@")+1:]
	if err := os.WriteFile(filepath.Join(c.dist, "image"), []byte(ref+"\n"), 0o644); err != nil {
		return err
	}
	overlay, err := writeImageOverlay(c, image, digest)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pushed %s (tag %s, %s)\n", ref, c.version, strings.Join(c.arches, ", "))
	fmt.Fprintf(out, "digest: %s\n", digest)
	fmt.Fprintf(out, "kustomize: kubectl apply -k %s\n", overlay)
	fmt.Fprintf(out, "helm: helm install nodeaddr deploy/helm/nodeaddr -n kube-system --set image.repository=%s --set image.digest=%s\n", image, digest)
	return nil
}

// writeImageOverlay writes DIST/kustomize/kustomization.yaml: deploy/ with its image replaced by
// image@digest, and returns the directory as `kubectl apply -k` takes it from the repository's
// root (relative when it lies inside the repository).
func writeImageOverlay(c config, image, digest string) (string, error) {
	repo, err := filepath.Abs(c.repo)
	if err != nil {
		return "", err
	}
	dir, err := filepath.Abs(filepath.Join(c.dist, "kustomize"))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// kustomize takes a base as a path relative to the overlay, never an absolute one.
	base, err := filepath.Rel(dir, filepath.Join(repo, "deploy"))
	if err != nil {
		return "", err
	}
	name, err := baseImageName(filepath.Join(repo, "deploy", "kustomization.yaml"))
	if err != nil {
		return "", err
	}
	k := fmt.Sprintf(`# Written by make image: deploy/ with the image it pushed, pinned by digest.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: %s
    newName: %s
    digest: %s
`, filepath.ToSlash(base), name, image, digest)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(repo, dir); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel) + "/", nil
	}
	return dir, nil
}

// baseImageName is the name of the one images entry of deploy/kustomization.yaml (the image its
// DaemonSet names), which an overlay's images entry must repeat.
func baseImageName(kustomization string) (string, error) {
	b, err := os.ReadFile(kustomization)
	if err != nil {
		return "", err
	}
	var k struct {
		Images []struct {
			Name string `json:"name"`
		} `json:"images"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return "", fmt.Errorf("%s: %w", kustomization, err)
	}
	if len(k.Images) != 1 || k.Images[0].Name == "" {
		return "", fmt.Errorf("%s: want one images entry, found %d", kustomization, len(k.Images))
	}
	return k.Images[0].Name, nil
}
