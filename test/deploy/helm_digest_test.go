package deploy

import (
	"maps"
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
	objs := decodeDocs(t, helmTemplate(t, sets...))
	maps.Copy(objs, helmTestHook(t, sets...))
	want := "registry.test/nodeaddr:9.9.9@" + digest
	for _, key := range []string{"DaemonSet/kube-system/nodeaddr", "Pod/kube-system/nodeaddr-test"} {
		o, ok := objs[key]
		if !ok {
			t.Fatalf("no %s in the render", key)
		}
		spec := o["spec"].(object)
		if tmpl, ok := spec["template"].(object); ok {
			spec = tmpl["spec"].(object)
		}
		if got := spec["containers"].([]any)[0].(object)["image"]; got != want {
			t.Errorf("%s: image %v, want %s", key, got, want)
		}
	}
	if labels := objs["DaemonSet/kube-system/nodeaddr"]["metadata"].(object)["labels"].(object); labels["app.kubernetes.io/version"] != "9.9.9" {
		t.Errorf("version label %v, want 9.9.9", labels["app.kubernetes.io/version"])
	}
	for _, bad := range []string{"0123", "sha256:XYZ", "sha512:" + strings.Repeat("0", 128)} {
		if _, err := helmTemplateErr(t, "--set", "image.digest="+bad); err == nil {
			t.Errorf("image.digest=%s rendered, want a schema error", bad)
		}
	}
}
