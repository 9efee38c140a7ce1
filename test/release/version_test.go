// Package release checks what a release ships agrees with itself: one version (the VERSION file) in
// the binary `make build` produces, its nodeaddr_build_info, the Helm chart and the kustomize base,
// and a VCS revision stamped into the binary.
package release

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// repoFile is the path of a file of the main repository.
func repoFile(parts ...string) string {
	return filepath.Join(append([]string{harness.RepoDir()}, parts...)...)
}

var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

// fileVersion is the content of VERSION: a semantic version without a leading v.
func fileVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(repoFile("VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if !semverRE.MatchString(v) || string(b) != v+"\n" {
		t.Fatalf("VERSION holds %q: want one semantic version without a v and one newline", b)
	}
	return v
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Image is the repository of the published image.
const Image = "ghcr.io/nodeaddr/nodeaddr"

// The chart's version and appVersion, and the kustomize base's image tag, are VERSION; both ship
// the released image's repository.
func TestManifestsFollowVersionFile(t *testing.T) {
	v := fileVersion(t)
	var chart struct{ Version, AppVersion string }
	readYAML(t, repoFile("deploy", "helm", "nodeaddr", "Chart.yaml"), &chart)
	if chart.Version != v || chart.AppVersion != v {
		t.Errorf("Chart.yaml version %q, appVersion %q; VERSION is %q", chart.Version, chart.AppVersion, v)
	}
	var values struct {
		Image struct{ Repository, Tag string } `json:"image"`
	}
	readYAML(t, repoFile("deploy", "helm", "nodeaddr", "values.yaml"), &values)
	if values.Image.Repository != Image {
		t.Errorf("values.yaml image.repository = %q, want %s", values.Image.Repository, Image)
	}
	if values.Image.Tag != "" {
		t.Errorf("values.yaml image.tag = %q: leave it empty so appVersion (VERSION) is the tag", values.Image.Tag)
	}
	var kust struct {
		Images []struct{ Name, NewName, NewTag string } `json:"images"`
	}
	readYAML(t, repoFile("deploy", "kustomization.yaml"), &kust)
	if len(kust.Images) != 1 || kust.Images[0].Name != Image || kust.Images[0].NewName != "" || kust.Images[0].NewTag != v {
		t.Errorf("deploy/kustomization.yaml images %+v: want one entry, name %s, newTag %q", kust.Images, Image, v)
	}
	// The DaemonSet names the image the images entry rewrites (else kustomize leaves it untouched).
	ds, err := os.ReadFile(repoFile("deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s+image: ` + regexp.QuoteMeta(Image) + `$`).Match(ds) {
		t.Errorf("deploy/daemonset.yaml does not name image %s", Image)
	}
}

// The Dockerfile's build command is `make build`'s (GO_BUILD), variables aside: the image's binary
// is stamped like the one the tests check.
func TestDockerfileBuildsAsMakeBuild(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(repoFile(name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	makeRE := regexp.MustCompile(`(?m)^GO_BUILD = (.*)$`)
	m := makeRE.FindStringSubmatch(read("Makefile"))
	if m == nil {
		t.Fatal("Makefile: no GO_BUILD = line")
	}
	dockerRE := regexp.MustCompile(`(?m)(CGO_ENABLED=0 go build .*) -o /out/nodeaddr ./cmd/nodeaddr$`)
	d := dockerRE.FindStringSubmatch(read("Dockerfile"))
	if d == nil {
		t.Fatal("Dockerfile: no `CGO_ENABLED=0 go build ... -o /out/nodeaddr ./cmd/nodeaddr` line")
	}
	// $(VAR) in make is ${VAR} in the Dockerfile's shell.
	normalize := regexp.MustCompile(`\$[({]([A-Z_]+)[)}]`)
	mk, dk := normalize.ReplaceAllString(m[1], "$$$1"), normalize.ReplaceAllString(d[1], "$$$1")
	if mk != dk {
		t.Errorf("build commands differ:\n Makefile:   %s\n Dockerfile: %s", mk, dk)
	}
	for _, want := range []string{"-X main.version=$VERSION", "-X main.revision=$REVISION"} {
		if !strings.Contains(mk, want) {
			t.Errorf("GO_BUILD lacks %s: %s", want, mk)
		}
	}
}

// The binary `make build` produces, built as CI builds it (-buildvcs=false, so only the ldflags can
// give it a revision), prints VERSION and the checked-out commit with --version and exposes both in
// nodeaddr_build_info.
func TestBuiltBinaryCarriesVersionAndRevision(t *testing.T) {
	mk, git := harness.Tool(t, "make", "make"), harness.Tool(t, "git", "git")
	v := fileVersion(t)
	out, err := exec.Command(git, "-C", harness.RepoDir(), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	rev := strings.TrimSpace(string(out))
	if rev == "" {
		t.Fatal("git rev-parse HEAD printed nothing")
	}

	dir := t.TempDir()
	cmd := exec.Command(mk, "-C", harness.RepoDir(), "build", "PLATFORMS=linux/"+runtime.GOARCH, "BIN_DIR="+dir)
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "nodeaddr-linux-"+runtime.GOARCH)

	out, err = exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	if want := fmt.Sprintf("nodeaddr %s (revision %s)\n", v, rev); string(out) != want {
		t.Errorf("--version printed %q, want %q", out, want)
	}

	labels := buildInfo(t, bin)
	if labels["version"] != v || labels["revision"] != rev || labels["revision"] == "" || labels["goversion"] == "" {
		t.Errorf("nodeaddr_build_info labels %v: want version %q, revision %q and a goversion", labels, v, rev)
	}
}

// buildInfo runs bin in dry-run mode (no cluster; it only reads this host's routes and sends
// nothing) with /metrics on a loopback port and returns the labels of nodeaddr_build_info.
func buildInfo(t *testing.T, bin string) map[string]string {
	t.Helper()
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Plain HTTP on loopback: --dry-run has no API server to check a scraper's token.
	cmd := exec.CommandContext(ctx, bin, "--dry-run", "--node-name=release-test", "--metrics-secure=false",
		"--metrics-bind-address="+addr, "--health-probe-bind-address=0")
	cmd.Stdout = io.Discard
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		<-exited
	}()

	// Poll until the agent serves /metrics (it binds before it logs "starting").
	for {
		body, err := get("http://" + addr + "/metrics")
		if err == nil {
			return buildInfoLabels(t, body)
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("nodeaddr --dry-run exited before serving /metrics: %v\n%s", err, stderr.String())
		case <-ctx.Done():
			t.Fatalf("no /metrics on %s within a minute: %v\n%s", addr, err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), nil
}

var labelRE = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

func buildInfoLabels(t *testing.T, body string) map[string]string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	var found []map[string]string
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "nodeaddr_build_info{")
		if !ok {
			continue
		}
		labels := map[string]string{}
		for _, m := range labelRE.FindAllStringSubmatch(rest, -1) {
			labels[m[1]] = m[2]
		}
		found = append(found, labels)
	}
	if len(found) != 1 {
		t.Fatalf("%d nodeaddr_build_info series, want 1:\n%s", len(found), body)
	}
	return found[0]
}

// README.md and docs/install.md install the release VERSION names: the kustomize base at the tag and
// the chart from the OCI registry.
func TestDocsInstallTheRelease(t *testing.T) {
	v := fileVersion(t)
	for _, doc := range []string{"README.md", filepath.Join("docs", "install.md")} {
		b, err := os.ReadFile(repoFile(doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"kubectl apply -k 'github.com/nodeaddr/nodeaddr/deploy?ref=v" + v + "'",
			"helm install nodeaddr oci://ghcr.io/nodeaddr/charts/nodeaddr --version " + v + " -n kube-system",
			"kubectl apply -k deploy/", // the local-source instructions stay
		} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %s", doc, want)
			}
		}
	}
}

// The release notes script prints CHANGELOG.md's section for VERSION (the tag's, with or without
// the v) and refuses a version without one, so a release cannot go out without notes.
func TestChangelogSectionForVersion(t *testing.T) {
	sh := harness.Tool(t, "sh", "dash")
	v := fileVersion(t)
	script := repoFile(".github", "scripts", "changelog-section")
	section := func(version string, file string) (string, error) {
		cmd := exec.Command(sh, script, version, file)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("%w: %s", err, stderr.String())
		}
		return string(out), nil
	}
	changelog := repoFile("CHANGELOG.md")
	notes, err := section("v"+v, changelog)
	if err != nil || strings.TrimSpace(notes) == "" {
		t.Fatalf("no notes for v%s: %v", v, err)
	}
	if plain, _ := section(v, changelog); plain != notes {
		t.Errorf("the section for %s differs from the one for v%s", v, v)
	}

	fixture := filepath.Join(t.TempDir(), "CHANGELOG.md")
	if err := os.WriteFile(fixture, []byte(`# Changelog

## [Unreleased]

- next

## [1.2.0] - 2026-01-02

### Fixed

- one

- two

## [1.1.0]

- old

[1.2.0]: https://example.invalid/v1.2.0
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ version, want string }{
		{"v1.2.0", "### Fixed\n\n- one\n\n- two\n"},
		{"1.1.0", "- old\n"},
	} {
		if got, err := section(c.version, fixture); err != nil || got != c.want {
			t.Errorf("section %s = %q, %v; want %q", c.version, got, err, c.want)
		}
	}
	for _, missing := range []string{"1.2", "1.3.0"} {
		if got, err := section(missing, fixture); err == nil {
			t.Errorf("section %s printed %q and succeeded; want a failure", missing, got)
		}
	}
}

// The release workflow pushes the image the manifests name, builds it with the VERSION and
// REVISION build arguments, signs by digest with an OIDC token, and pushes the chart.
func TestReleaseWorkflowPublishesTheShippedImage(t *testing.T) {
	b, err := os.ReadFile(repoFile(".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	wf := string(b)
	for _, want := range []string{
		"IMAGE: " + Image, "CHARTS: oci://ghcr.io/nodeaddr/charts", `tags: ["v*"]`,
		"platforms: linux/amd64,linux/arm64", "VERSION=${{ env.VERSION }}", "REVISION=${{ github.sha }}",
		"id-token: write", `cosign sign --yes "${IMAGE}@${DIGEST}"`, "helm push", "changelog-section",
		"uses: ./.github/workflows/ci.yml",
	} {
		if !strings.Contains(wf, want) {
			t.Errorf("release.yml lacks %s", want)
		}
	}
	// Every action is pinned to a full version.
	for _, m := range regexp.MustCompile(`uses: ([^\s]+)`).FindAllStringSubmatch(wf, -1) {
		if !strings.HasPrefix(m[1], "./") && !regexp.MustCompile(`@v\d+\.\d+\.\d+$`).MatchString(m[1]) {
			t.Errorf("release.yml: %s is not pinned to a version", m[1])
		}
	}
}
