package plugin

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// installSection is the "Install" section of docs/plugin.md, up to its next heading.
func installSection(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(harness.RepoDir(), "docs", "plugin.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Install\n")
	if !ok {
		t.Fatal("docs/plugin.md has no Install section")
	}
	section, _, _ = strings.Cut(section, "\n#")
	return section
}

// docLine is the line of section that matches re, or fails t.
func docLine(t *testing.T, section, re string) string {
	t.Helper()
	line := regexp.MustCompile(`(?m)^` + re + `.*$`).FindString(section)
	if line == "" {
		t.Fatalf("docs/plugin.md, Install: no line matching %s", re)
	}
	return line
}

// TestInstallFromCheckout: the install paths docs/plugin.md gives work from this checkout, with no
// release: its `go install` line, and its `make build` then `install` lines (make build for this
// machine's platform only, into a temporary directory, and the binary installed there instead of
// /usr/local/bin). kubectl finds either on PATH; make build's is stamped with VERSION. The commands
// name no release tag and no krew install (plugins/nodeaddr.yaml is the release's template).
func TestInstallFromCheckout(t *testing.T) {
	kubectl := harness.MustBuild(t).Kubectl
	section := installSection(t)
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		if strings.Contains(block[1], "@v") || strings.Contains(block[1], "krew") {
			t.Errorf("docs/plugin.md, Install: a command names a release or krew, which a checkout does not have:\n%s", block[1])
		}
	}
	version, err := os.ReadFile(filepath.Join(harness.RepoDir(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	sh := func(dir string, env []string, line string) {
		t.Helper()
		cmd := exec.Command("bash", "-c", line)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	pluginVersion := func(dir string) string {
		t.Helper()
		cmd := exec.Command(kubectl, "nodeaddr", "--version")
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl nodeaddr --version with %s on PATH: %v\n%s", dir, err, out)
		}
		return string(out)
	}

	gobin := t.TempDir()
	sh(harness.RepoDir(), []string{"GOBIN=" + gobin, "GOFLAGS="}, docLine(t, section, `go install \./cmd/kubectl-nodeaddr\b`))
	if got := pluginVersion(gobin); got != "kubectl nodeaddr version dev (revision unknown)\n" {
		t.Errorf("go install: kubectl nodeaddr --version = %q", got)
	}

	// make build writes into BIN_DIR (bin/ by default, which the install line reads): a temporary
	// directory stands for it, seen as bin/ from a work directory of its own.
	binDir, work, dest := t.TempDir(), t.TempDir(), t.TempDir()
	makeLine := docLine(t, section, `make build\b`) // its Makefile variables come from the environment
	sh(harness.RepoDir(), []string{"PLATFORMS=" + runtime.GOOS + "/" + runtime.GOARCH, "PLUGIN_PLATFORMS=", "BIN_DIR=" + binDir, "GOFLAGS="}, makeLine)
	if err := os.Symlink(binDir, filepath.Join(work, "bin")); err != nil {
		t.Fatal(err)
	}
	installLine := docLine(t, section, `install -m 0755 bin/kubectl-nodeaddr-\$\(go env GOOS\)-\$\(go env GOARCH\) /usr/local/bin/kubectl-nodeaddr`)
	sh(work, nil, strings.Replace(installLine, "/usr/local/bin/", dest+"/", 1))
	if got, want := pluginVersion(dest), "kubectl nodeaddr version "+strings.TrimSpace(string(version))+" (revision "; !strings.HasPrefix(got, want) {
		t.Errorf("make build: kubectl nodeaddr --version = %q, want %s…", got, want)
	}
}
