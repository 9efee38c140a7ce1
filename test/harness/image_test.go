package harness

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestImageRecipeMatchesDockerfile: the image the real-node suite builds is the Dockerfile's final
// stage (user, entrypoint, binary path, build command). If one changes, so must the other.
func TestImageRecipeMatchesDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(TestModuleDir()), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	final := df[strings.LastIndex(df, "\nFROM "):]
	if got := firstMatch(t, final, `(?m)^FROM (\S+)`); got != "scratch" {
		t.Errorf("final stage FROM %s, recipe builds on scratch (an empty base)", got)
	}
	if got := firstMatch(t, final, `(?m)^USER (\S+)`); got != ImageUser {
		t.Errorf("Dockerfile USER %s, recipe %s", got, ImageUser)
	}
	if got, want := firstMatch(t, final, `(?m)^ENTRYPOINT (.*)$`), `["`+strings.Join(ImageEntrypoint, `", "`)+`"]`; got != want {
		t.Errorf("Dockerfile ENTRYPOINT %s, recipe %s", got, want)
	}
	if got := firstMatch(t, final, `(?m)^COPY --from=build \S+ (\S+)$`); got != ImageBinary {
		t.Errorf("Dockerfile copies the binary to %s, recipe to %s", got, ImageBinary)
	}
	// The build's RUN may continue over lines ("\" at the end) and set VERSION first (... && go build).
	joined := strings.ReplaceAll(df, "\\\n", " ")
	run := firstMatch(t, joined, `(?m)^RUN (?:.*&&\s+)?(.*go build.*)$`)
	run = strings.Join(strings.Fields(run), " ")
	out := firstMatch(t, run, `-o (\S+)`)
	if got := firstMatch(t, final, `(?m)^COPY --from=build (\S+)`); got != out {
		t.Errorf("final stage copies %s, the build writes %s", got, out)
	}
	// The Dockerfile cross-compiles; the suite builds for this machine.
	run = strings.TrimSpace(strings.Replace(run, "GOOS=$TARGETOS GOARCH=$TARGETARCH", "", 1))
	var quoted []string
	for _, a := range NodeaddrBuildArgs {
		a = strings.ReplaceAll(a, "${OUT}", out)
		if strings.Contains(a, " ") {
			a = `"` + a + `"`
		}
		quoted = append(quoted, a)
	}
	if want := strings.Join(append(append([]string{}, NodeaddrBuildEnv...), quoted...), " "); run != want {
		t.Errorf("Dockerfile builds with\n  %s\nthe suite's image recipe with\n  %s", run, want)
	}
}

func firstMatch(t *testing.T, s, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %s in the Dockerfile", re)
	}
	return m[1]
}

func TestNormalizeImage(t *testing.T) {
	for in, want := range map[string]string{
		"nodeaddr:v0.1.0":                "docker.io/library/nodeaddr:v0.1.0",
		"nodeaddr":                       "docker.io/library/nodeaddr:latest",
		"example/nodeaddr:v1":            "docker.io/example/nodeaddr:v1",
		"registry.test/a/nodeaddr:v1":    "registry.test/a/nodeaddr:v1",
		"localhost:5000/pause@sha256:ab": "localhost:5000/pause@sha256:ab",
	} {
		if got := NormalizeImage(in); got != want {
			t.Errorf("NormalizeImage(%q) = %q, want %q", in, got, want)
		}
	}
}
