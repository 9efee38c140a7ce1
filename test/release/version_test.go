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
	"slices"
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
	// The chart refuses its default image when it is a development version's (never published):
	// its template names the published repository, which must stay the default's.
	helpers, err := os.ReadFile(repoFile("deploy", "helm", "nodeaddr", "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(helpers), `(eq .Values.image.repository "`+Image+`")`) {
		t.Errorf("templates/_helpers.tpl does not compare image.repository with %s (the unpublished -dev image's refusal)", Image)
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
	// The build context holds every directory the binary's packages come from (no container
	// engine runs here, so a missing COPY would first fail in the release workflow).
	list := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./cmd/nodeaddr")
	list.Dir = filepath.Dir(repoFile("go.mod"))
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dockerfile := read("Dockerfile")
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, "github.com/nodeaddr/nodeaddr/")
		if !ok || strings.HasPrefix(pkg, "github.com/nodeaddr/nodeaddr/test") {
			continue
		}
		top, _, _ := strings.Cut(rel, "/")
		if !strings.Contains(dockerfile, "COPY "+top+"/ "+top+"/") {
			t.Errorf("Dockerfile copies no %s/, which ./cmd/nodeaddr imports (%s)", top, pkg)
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
	var body string
	if err := harness.Poll(time.Minute, 50*time.Millisecond, "/metrics on "+addr, func() (bool, string) {
		var err error
		if body, err = get("http://" + addr + "/metrics"); err == nil {
			return true, ""
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("nodeaddr --dry-run exited before serving /metrics: %v\n%s", err, stderr.String())
		default:
		}
		return false, err.Error()
	}); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	return buildInfoLabels(t, body)
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

// README.md and docs/install.md install what VERSION describes. A release (no pre-release part):
// the kustomize base at its tag and its chart from the OCI registry. A development version (-dev,
// on main): from a checkout, since no published image or chart carries main's code
// (TestDocumentedVersionsAreReleased keeps the dev version itself out of the docs).
func TestDocsInstallTheRelease(t *testing.T) {
	v := fileVersion(t)
	want := []string{
		"kubectl apply -k 'github.com/nodeaddr/nodeaddr/deploy?ref=v" + v + "'",
		"helm install nodeaddr oci://ghcr.io/nodeaddr/charts/nodeaddr --version " + v + " -n kube-system",
	}
	if isDev(v) {
		want = []string{"helm install nodeaddr deploy/helm/nodeaddr"}
	}
	want = append(want, "kubectl apply -k deploy/") // the local-source instructions stay
	for _, doc := range []string{"README.md", filepath.Join("docs", "install.md")} {
		b, err := os.ReadFile(repoFile(doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %s", doc, w)
			}
		}
	}
}

// isDev reports whether v is a development version (main's: the next release plus -dev), which the
// release workflow refuses to publish.
func isDev(v string) bool { return strings.HasSuffix(v, "-dev") }

// main's VERSION is a development version, distinct from every released one; a release's VERSION
// has its CHANGELOG section. The release workflow refuses to publish a -dev version.
func TestVersionIsDevOrReleased(t *testing.T) {
	v := fileVersion(t)
	released := releasedVersions(t, repoFile("CHANGELOG.md"))
	switch {
	case isDev(v) && released[strings.TrimSuffix(v, "-dev")]:
		t.Errorf("VERSION %s: %s is already released; main carries the next version", v, strings.TrimSuffix(v, "-dev"))
	case !isDev(v) && !released[v]:
		t.Errorf("VERSION %s is neither a development version (-dev) nor a CHANGELOG.md section", v)
	}
	wf, err := os.ReadFile(repoFile(".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(wf), "*-dev)") {
		t.Errorf("release.yml does not refuse a -dev VERSION")
	}
}

// releasedVersions are CHANGELOG.md's "## [X]" sections other than Unreleased.
func releasedVersions(t *testing.T, changelog string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(changelog)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## \[([^\]]+)\]`).FindAllStringSubmatch(string(b), -1) {
		if m[1] != "Unreleased" {
			out[m[1]] = true
		}
	}
	return out
}

// noArtifacts are released versions that published no image and no chart: v0.1.0 predates the
// release workflow (CHANGELOG.md lists the workflow and the image name under a later version).
var noArtifacts = map[string]bool{"0.1.0": true}

// documentedVersionRE finds the versions an install command or manifest names: a kustomize ref, a
// chart version, an image tag (with the registry's repository, or image.tag / newTag).
var documentedVersionRE = regexp.MustCompile(`(\?ref=v|--version[= ]|` + regexp.QuoteMeta(Image) +
	`:|image\.tag=|newTag: )(\d+\.\d+\.\d+[0-9A-Za-z.+-]*)`)

// documentedVersions are the versions README.md-style text names, with what named them.
func documentedVersions(text string) (versions []string, contexts []string) {
	for _, m := range documentedVersionRE.FindAllStringSubmatch(text, -1) {
		versions = append(versions, m[2])
		contexts = append(contexts, m[0])
	}
	return versions, contexts
}

// The docs install only what was released: every version README.md and docs/*.md name in a `?ref=`,
// a chart `--version` or an image tag is a released CHANGELOG.md section; an image tag or chart
// version also one that published them.
func TestDocumentedVersionsAreReleased(t *testing.T) {
	released := releasedVersions(t, repoFile("CHANGELOG.md"))
	if len(released) == 0 {
		t.Fatal("CHANGELOG.md has no released section")
	}
	docs, err := filepath.Glob(repoFile("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append([]string{repoFile("README.md")}, docs...) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(harness.RepoDir(), doc)
		versions, contexts := documentedVersions(string(b))
		for i, v := range versions {
			switch {
			case !released[v]:
				t.Errorf("%s: %q names %s, which CHANGELOG.md has not released", name, contexts[i], v)
			case noArtifacts[v] && !strings.HasPrefix(contexts[i], "?ref="):
				t.Errorf("%s: %q names %s, which published no image or chart", name, contexts[i], v)
			}
		}
	}
}

// The finder of TestDocumentedVersionsAreReleased sees each form an install command takes, and not
// placeholders or other numbers.
func TestDocumentedVersionsFinder(t *testing.T) {
	text := "kubectl apply -k 'github.com/nodeaddr/nodeaddr/deploy?ref=v0.3.0'\n" +
		"helm install nodeaddr oci://ghcr.io/nodeaddr/charts/nodeaddr --version 0.4.0-rc.1 -n kube-system\n" +
		"cosign verify ghcr.io/nodeaddr/nodeaddr:0.5.0 \\\n" +
		"--set image.tag=0.6.0@sha256:<digest>\n    newTag: 0.7.0-dev\n" +
		"?ref=vX.Y.Z --version X.Y.Z nodeaddr:v0.1.0 10.1.0.0/16 --version NEW"
	got, _ := documentedVersions(text)
	if want := []string{"0.3.0", "0.4.0-rc.1", "0.5.0", "0.6.0", "0.7.0-dev"}; !slices.Equal(got, want) {
		t.Errorf("found %q, want %q", got, want)
	}
	fixture := filepath.Join(t.TempDir(), "CHANGELOG.md")
	if err := os.WriteFile(fixture, []byte("# Changelog\n\n## [Unreleased]\n\n## [1.2.0] - 2026-01-02\n\n## [1.1.0]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := releasedVersions(t, fixture); len(got) != 2 || !got["1.2.0"] || !got["1.1.0"] {
		t.Errorf("released versions %v, want 1.1.0 and 1.2.0", got)
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
	if isDev(v) {
		// main: no notes for a development version (the release would stop there); the notes of
		// the last release are still found.
		if notes, err := section("v"+v, changelog); err == nil {
			t.Errorf("notes for the development version v%s: %q; want a failure", v, notes)
		}
		b, err := os.ReadFile(changelog)
		if err != nil {
			t.Fatal(err)
		}
		last := regexp.MustCompile(`(?m)^## \[(\d[^\]]*)\]`).FindSubmatch(b)
		if last == nil {
			t.Fatal("CHANGELOG.md has no released section")
		}
		v = string(last[1])
	}
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

// The release workflow publishes through `make release` (what test/release/rehearsal rehearses)
// and nothing else: no image build, signature or chart push of its own; the registry comes from a
// repository variable, checked against the manifests' image, and cosign signs with the OIDC token.
func TestReleaseWorkflowPublishesTheShippedImage(t *testing.T) {
	b, err := os.ReadFile(repoFile(".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	wf := string(b)
	for _, want := range []string{
		`tags: ["v*"]`, "uses: ./.github/workflows/ci.yml", "id-token: write",
		"REGISTRY: ${{ vars.REGISTRY }}", `repository: ${REGISTRY}/nodeaddr" deploy/helm/nodeaddr/values.yaml`,
		`make release REGISTRY="$REGISTRY"`, "--notes-file dist/notes.md",
		// The plugin's krew archives and the manifest filled in for them (docs/plugin.md, "Install").
		"dist/kubectl-nodeaddr_v*.tar.gz dist/nodeaddr.yaml",
	} {
		if !strings.Contains(wf, want) {
			t.Errorf("release.yml lacks %s", want)
		}
	}
	// The steps, without the comments that describe what make release does.
	steps := regexp.MustCompile(`(?m)(^|\s)#.*$`).ReplaceAllString(wf, "")
	for _, other := range []string{"buildx", "build-push-action", "cosign sign", "cosign attest", "helm push", "sbom-action"} {
		if strings.Contains(steps, other) {
			t.Errorf("release.yml runs %s itself: every release step belongs in make release", other)
		}
	}
	// Every action is pinned to a full version.
	for _, m := range regexp.MustCompile(`uses: ([^\s]+)`).FindAllStringSubmatch(wf, -1) {
		if !strings.HasPrefix(m[1], "./") && !regexp.MustCompile(`@v\d+\.\d+\.\d+$`).MatchString(m[1]) {
			t.Errorf("release.yml: %s is not pinned to a version", m[1])
		}
	}
}
