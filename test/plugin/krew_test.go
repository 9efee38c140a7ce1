package plugin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// krewVersion is the krew release whose manifest validator (the one krew-index runs on every
// submitted manifest) checks plugins/nodeaddr.yaml. Its validation package is internal to krew, so
// the test runs the validator's command, built from the Go module proxy.
const krewVersion = "v0.4.3"

// krewValidator builds (once per cache) sigs.k8s.io/krew/cmd/validate-krew-manifest.
func krewValidator(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(harness.CacheDir(), "bin", "krew-"+krewVersion)
	bin := filepath.Join(dir, "validate-krew-manifest")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "install", "sigs.k8s.io/krew/cmd/validate-krew-manifest@"+krewVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		harness.SkipOrFail(t, "cannot build krew's validate-krew-manifest %s from the Go module proxy: %v\n%s", krewVersion, err, out)
	}
	return bin
}

// validate runs krew's validator on a manifest (without installing: that would download the
// release archives).
func validate(bin, manifest string) (string, error) {
	out, err := exec.Command(bin, "-manifest", manifest, "-skip-install").CombinedOutput()
	return string(out), err
}

// TestKrewManifest: plugins/nodeaddr.yaml passes krew's own validation, and a copy without a
// checksum does not (the validator really reads the file); its version is the repository's, its
// platforms are the release's four, each naming its archive.
func TestKrewManifest(t *testing.T) {
	manifest := filepath.Join(harness.RepoDir(), "plugins", "nodeaddr.yaml")
	bin := krewValidator(t)
	if out, err := validate(bin, manifest); err != nil {
		t.Fatalf("krew validate-krew-manifest %s: %v\n%s", krewVersion, err, out)
	}
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "nodeaddr.yaml")
	if err := os.WriteFile(broken, regexp.MustCompile(`(?m)^\s+sha256: .*\n`).ReplaceAll(data, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := validate(bin, broken); err == nil || !strings.Contains(out, "`sha256` sum has to be set") {
		t.Errorf("a manifest without sha256 passed krew's validation: %v\n%s", err, out)
	}

	var p struct {
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				Sha256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	version, err := os.ReadFile(filepath.Join(harness.RepoDir(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := "v" + strings.TrimSpace(string(version))
	if p.Spec.Version != v {
		t.Errorf("spec.version %q, VERSION says %q", p.Spec.Version, v)
	}
	var got []string
	for _, pl := range p.Spec.Platforms {
		goos, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		got = append(got, goos+"/"+arch)
		wantURI := fmt.Sprintf("https://github.com/nodeaddr/nodeaddr/releases/download/%s/kubectl-nodeaddr_%s_%s_%s.tar.gz", v, v, goos, arch)
		if pl.URI != wantURI || pl.Bin != "kubectl-nodeaddr" || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(pl.Sha256) {
			t.Errorf("platform %s/%s: uri %q (want %q), bin %q, sha256 %q", goos, arch, pl.URI, wantURI, pl.Bin, pl.Sha256)
		}
	}
	if want := "linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"; strings.Join(got, " ") != want {
		t.Errorf("platforms %v, want %s", got, want)
	}
}
