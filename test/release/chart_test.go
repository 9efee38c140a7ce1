package release

import (
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The release workflow's chart steps, against an OCI registry on loopback: `helm package` with
// VERSION, `helm push` (whose "Digest:" line the workflow signs), and an install from the pushed
// chart renders the released image.
func TestChartPushesToOCIAndInstallsFromIt(t *testing.T) {
	helm := harness.MustBuildHelm(t)
	v := fileVersion(t)
	reg := httptest.NewServer(registry.New())
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")

	home := t.TempDir()
	dist := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(helm, args...)
		// Helm's caches and configuration go to a throwaway home; the registry is on loopback.
		cmd.Env = harness.HelmEnv(home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	chart := repoFile("deploy", "helm", "nodeaddr")
	run("lint", "--strict", chart)
	run("package", chart, "--version", v, "--app-version", v, "--destination", dist)
	out := run("push", filepath.Join(dist, "nodeaddr-"+v+".tgz"), "oci://"+host+"/nodeaddr/charts", "--plain-http")
	// What the workflow extracts: sed -n 's/^Digest: //p'.
	if m := regexp.MustCompile(`(?m)^Digest: (sha256:[0-9a-f]{64})$`).FindStringSubmatch(out); m == nil {
		t.Errorf("helm push printed no Digest: line:\n%s", out)
	}
	args := []string{"template", "nodeaddr", "oci://" + host + "/nodeaddr/charts/nodeaddr", "--version", v,
		"--namespace", "kube-system", "--plain-http"}
	if isDev(v) {
		// A development version's chart refuses its never-published default image unless it is
		// chosen explicitly (test/deploy TestHelmRefusesTheUnpublishedDefaultImage).
		args = append(args, "--set", "image.tag="+v)
	}
	rendered := run(args...)
	if want := `image: "` + Image + ":" + v + `"`; !strings.Contains(rendered, want) {
		t.Errorf("the chart installed from the registry does not render %s", want)
	}
}
