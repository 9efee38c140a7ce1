package rehearsal

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// checkPluginAssets checks what `make release` leaves for the GitHub release and krew: one archive
// per platform of plugins/nodeaddr.yaml holding kubectl-nodeaddr (an ELF or Mach-O binary of that
// platform) and LICENSE, every one in SHA256SUMS with its sum, and dist/nodeaddr.yaml, the krew
// manifest with the release's version and each archive's sha256. The linux/amd64 plugin runs.
func checkPluginAssets(t *testing.T, pub published) {
	sums := readSums(t, filepath.Join(pub.Dist, "SHA256SUMS"))
	var manifest struct {
		Spec struct {
			Version   string
			Platforms []struct {
				Selector struct{ MatchLabels map[string]string } `json:"selector"`
				URI      string                                  `json:"uri"`
				Sha256   string                                  `json:"sha256"`
				Bin      string                                  `json:"bin"`
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(pub.Dist, "nodeaddr.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.Spec.Version != "v"+pub.Version || len(manifest.Spec.Platforms) != 4 {
		t.Fatalf("krew manifest: version %q, %d platforms; want v%s and 4", manifest.Spec.Version, len(manifest.Spec.Platforms), pub.Version)
	}
	for _, p := range manifest.Spec.Platforms {
		goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		name := fmt.Sprintf("kubectl-nodeaddr_v%s_%s_%s.tar.gz", pub.Version, goos, arch)
		if !strings.HasSuffix(p.URI, "/v"+pub.Version+"/"+name) {
			t.Errorf("%s/%s: uri %s, want …/v%s/%s", goos, arch, p.URI, pub.Version, name)
		}
		archive := readFile(t, filepath.Join(pub.Dist, name))
		sum := sha256.Sum256(archive)
		if got := hex.EncodeToString(sum[:]); p.Sha256 != got || sums[name] != got {
			t.Errorf("%s: manifest sha256 %s, SHA256SUMS %s, archive %s", name, p.Sha256, sums[name], got)
		}
		files := untar(t, archive)
		if len(files["LICENSE"]) == 0 || len(files) != 2 {
			t.Errorf("%s holds %d files (LICENSE %d bytes), want kubectl-nodeaddr and LICENSE", name, len(files), len(files["LICENSE"]))
		}
		if magic := binaryMagic(files[p.Bin]); magic != map[string]string{"linux": "ELF", "darwin": "Mach-O"}[goos] {
			t.Errorf("%s: %s is %q, want a %s binary", name, p.Bin, magic, goos)
		}
		if goos == "linux" && arch == "amd64" {
			bin := filepath.Join(t.TempDir(), "kubectl-nodeaddr")
			if err := writeExecutable(bin, files[p.Bin]); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "stale") {
				t.Errorf("the released linux/amd64 plugin: %v\n%s", err, out)
			}
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeExecutable(path string, data []byte) error { return os.WriteFile(path, data, 0o755) }

// readSums parses sha256sum's format: name → hex sum.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(readFile(t, path))), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			sums[f[1]] = f[0]
		}
	}
	return sums
}

// untar returns the regular files of a .tar.gz by name.
func untar(t *testing.T, archive []byte) map[string][]byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}

// binaryMagic names an executable's format by its first bytes.
func binaryMagic(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x7fELF")):
		return "ELF"
	case bytes.HasPrefix(b, []byte{0xcf, 0xfa, 0xed, 0xfe}):
		return "Mach-O"
	}
	return ""
}
