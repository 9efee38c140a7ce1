package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every build carries the VERSION file's version, a plain `go build` included (go:embed cannot reach
// the repository root, so `make generate` copies it into version_gen.go): the copy must be VERSION.
func TestVersionFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(b))
	if fileVersion != want {
		t.Fatalf("cmd/nodeaddr/version_gen.go holds %q, VERSION %q: run make generate", fileVersion, want)
	}
	// A test binary is built without -ldflags: what `go build ./cmd/nodeaddr` prints.
	var out strings.Builder
	if run(t.Context(), []string{"--version"}, os.Getenv, &out, io.Discard); out.String() != "nodeaddr "+want+" (revision unknown)\n" {
		t.Errorf("--version prints %q without -ldflags, want VERSION %s", out.String(), want)
	}
}
