package deploy

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// image.digest pins the agent's and the helm-test hook's image by digest (REPOSITORY:TAG@DIGEST),
// while image.tag stays the version label; a digest that is not sha256:<64 hex> is refused by the
// schema, so a typo cannot render an image reference the runtime rejects at pull time.
func TestHelmImageDigest(t *testing.T) {
	harness.RequireE2E(t)
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	sets := []string{"--set", "image.repository=registry.test/nodeaddr", "--set", "image.tag=9.9.9", "--set", "image.digest=" + digest}
	objs := harness.DecodeDocs(t, harness.HelmTemplate(t, sets...))
	maps.Copy(objs, helmTestHook(t, sets...))
	want := "registry.test/nodeaddr:9.9.9@" + digest
	for _, key := range []string{"DaemonSet/kube-system/nodeaddr", "Pod/kube-system/nodeaddr-test"} {
		o, ok := objs[key]
		if !ok {
			t.Fatalf("no %s in the render", key)
		}
		spec := o["spec"].(harness.Object)
		if tmpl, ok := spec["template"].(harness.Object); ok {
			spec = tmpl["spec"].(harness.Object)
		}
		if got := spec["containers"].([]any)[0].(harness.Object)["image"]; got != want {
			t.Errorf("%s: image %v, want %s", key, got, want)
		}
	}
	if labels := objs["DaemonSet/kube-system/nodeaddr"]["metadata"].(harness.Object)["labels"].(harness.Object); labels["app.kubernetes.io/version"] != "9.9.9" {
		t.Errorf("version label %v, want 9.9.9", labels["app.kubernetes.io/version"])
	}
	for _, bad := range []string{"0123", "sha256:XYZ", "sha512:" + strings.Repeat("0", 128)} {
		if _, err := harness.HelmTemplateErr(t, "--set", "image.digest="+bad); err == nil {
			t.Errorf("image.digest=%s rendered, want a schema error", bad)
		}
	}
}

// A development version's chart (VERSION -dev, from a checkout of main) refuses to render its
// default image, which is never published (every pod would sit in ImagePullBackOff without a
// hint), and says how to choose one: `make image`. Any choice renders: a repository (make image
// pushes the tag VERSION), a digest, a tag. A released chart renders its default image.
func TestHelmRefusesTheUnpublishedDefaultImage(t *testing.T) {
	harness.RequireE2E(t)
	dir := t.TempDir()
	for _, v := range []string{"9.8.7-dev", "9.8.7"} {
		if _, stderr, err := harness.HelmRun(t, "package", harness.ChartDir(), "--version", v, "--app-version", v, "--destination", dir); err != nil {
			t.Fatalf("helm package %s: %v\n%s", v, err, stderr)
		}
	}
	render := func(v string, sets ...string) (string, error) {
		args := append([]string{"template", "nodeaddr", filepath.Join(dir, "nodeaddr-"+v+".tgz"), "--namespace", "kube-system"}, sets...)
		out, stderr, err := harness.HelmRun(t, args...)
		if err != nil {
			return "", fmt.Errorf("%v\n%s", err, stderr)
		}
		return out, nil
	}
	if _, err := render("9.8.7-dev"); err == nil || !strings.Contains(err.Error(), "make image REGISTRY=HOST/PATH") ||
		!strings.Contains(err.Error(), "image.digest") {
		t.Errorf("chart 9.8.7-dev with the default image: %v, want a refusal naming make image and image.digest", err)
	}
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for sets, want := range map[string]string{
		"image.repository=registry.test/nodeaddr":                        "registry.test/nodeaddr:9.8.7-dev",
		"image.repository=registry.test/nodeaddr,image.digest=" + digest: "registry.test/nodeaddr:9.8.7-dev@" + digest,
		"image.tag=9.8.7-dev":                                            ":9.8.7-dev\"",
		"image.digest=" + digest:                                         ":9.8.7-dev@" + digest,
	} {
		out, err := render("9.8.7-dev", "--set", sets)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("chart 9.8.7-dev --set %s: %v, want an image ending %s", sets, err, want)
		}
	}
	if out, err := render("9.8.7"); err != nil || !strings.Contains(out, ":9.8.7\"") {
		t.Errorf("chart 9.8.7 with the default image: %v, want its default image, tag 9.8.7", err)
	}
}
