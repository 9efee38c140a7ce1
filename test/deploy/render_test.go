package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// eventsPolicyName is the policy on the agent's Events (deploy/admission-policy.yaml).
const eventsPolicyName = "nodeaddr-events"

// documentedOverlay is the kustomization docs/customize.md shows under the comment "# overlay: NAME",
// as an operator copies it (its checkout paths, ../nodeaddr/deploy, are resolved by
// harness.RenderKustomization).
func documentedOverlay(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.RepoDir(), "docs", "customize.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n# overlay: "+name+"\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed || !strings.Contains(block, "transformers:\n  - ../nodeaddr/deploy/wiring") {
		t.Fatalf("docs/customize.md has no overlay %q that lists deploy/wiring under transformers", name)
	}
	return block
}

// annotationsOverlay is docs/customize.md's annotations overlay with value in place of its example.
func annotationsOverlay(t *testing.T, value string) string {
	t.Helper()
	const example = `value: "nodeaddr,calico"`
	o := documentedOverlay(t, "annotations")
	if !strings.Contains(o, example) {
		t.Fatalf("docs/customize.md's annotations overlay lacks %s", example)
	}
	v, _ := json.Marshal(value)
	return strings.Replace(o, example, "value: "+string(v), 1)
}

// applyAnnotationsConfig sets --annotations as an operator does: docs/customize.md's overlay that
// patches the ConfigMap, applied with kubectl (ConfigMap and policy together).
func applyAnnotationsConfig(t *testing.T, cp *harness.ControlPlane, spec string) string {
	t.Helper()
	rendered := harness.RenderKustomization(t, annotationsOverlay(t, spec))
	harness.KubectlFor(t, cp)(rendered, "apply", "--server-side", "--force-conflicts", "--field-manager=nodeaddr-install", "-f", "-")
	return rendered
}
