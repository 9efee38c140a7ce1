package rehearsal

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// finalStage is what the Dockerfile's last stage declares about the image it produces.
type finalStage struct {
	Base       string
	Labels     map[string]string
	User       string
	Entrypoint []string
	Files      []string // COPY destinations
}

// parseFinalStage reads the instructions after the Dockerfile's last FROM (continuation lines
// joined, comments dropped) and substitutes ${NAME} with args[NAME]. It refuses instructions it
// does not know, so a new one in the Dockerfile fails the comparison instead of being ignored.
func parseFinalStage(dockerfile string, args map[string]string) (finalStage, error) {
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(dockerfile, "\\\n", " "), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.ToUpper(l), "FROM ") {
			last = i
		}
	}
	if last < 0 {
		return finalStage{}, fmt.Errorf("no FROM")
	}
	subst := regexp.MustCompile(`\$\{(\w+)\}`)
	s := finalStage{Labels: map[string]string{}}
	for _, l := range lines[last:] {
		op, rest, _ := strings.Cut(l, " ")
		rest = subst.ReplaceAllStringFunc(strings.TrimSpace(rest), func(m string) string {
			return args[m[2:len(m)-1]]
		})
		if err := s.add(strings.ToUpper(op), rest); err != nil {
			return s, fmt.Errorf("%s: %w", l, err)
		}
	}
	return s, nil
}

var labelRE = regexp.MustCompile(`([\w.-]+)="([^"]*)"`)

func (s *finalStage) add(op, rest string) error {
	switch op {
	case "FROM":
		s.Base = strings.Fields(rest)[0]
	case "ARG":
	case "LABEL":
		for _, m := range labelRE.FindAllStringSubmatch(rest, -1) {
			s.Labels[m[1]] = m[2]
		}
	case "COPY":
		f := strings.Fields(rest)
		s.Files = append(s.Files, f[len(f)-1])
	case "USER":
		s.User = rest
	case "ENTRYPOINT":
		return json.Unmarshal([]byte(rest), &s.Entrypoint)
	default:
		return fmt.Errorf("instruction %s: teach parseFinalStage and test/tools/release what it means for the image", op)
	}
	return nil
}

// The parser reads what the comparison relies on.
func TestParseFinalStage(t *testing.T) {
	got, err := parseFinalStage(`FROM golang AS build
RUN go build
# comment
FROM scratch
ARG REVISION=unknown
LABEL a.b="x" \
      c="${REVISION}"
COPY --from=build /out/bin /bin
USER 1:1
ENTRYPOINT ["/bin", "-v"]
`, map[string]string{"REVISION": "abc"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Base":"scratch","Labels":{"a.b":"x","c":"abc"},"User":"1:1","Entrypoint":["/bin","-v"],"Files":["/bin"]}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("parsed %s, want %s", b, want)
	}
	if _, err := parseFinalStage("FROM scratch\nENV A=b\n", nil); err == nil {
		t.Error("ENV was accepted: an instruction the release tool does not reproduce must fail the parse")
	}
}

func readDockerfileStage(t *testing.T, repo, revision string) finalStage {
	t.Helper()
	b, err := os.ReadFile(repo + "/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseFinalStage(string(b), map[string]string{"REVISION": revision})
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return s
}
