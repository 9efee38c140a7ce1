package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPortableImports: the plugin is released for darwin too, so of this module it imports only
// packages that build everywhere. publisher (through resolver's netlink address flags) and the
// agent's other packages are Linux-only: importing them broke the darwin build once.
func TestPortableImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/nodeaddr/nodeaddr/"
	allowed := []string{module + "cmd/kubectl-nodeaddr", module + "internal/csrapproval/rules", module + "internal/inspect", module + "internal/remediation/verdict", module + "internal/vocab",
		module + "internal/nodeindex", module + "resolver/explanation"}
	var own []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module) {
			own = append(own, p)
			if !slices.Contains(allowed, p) {
				t.Errorf("kubectl-nodeaddr imports %s, which is not known to build on darwin", p)
			}
		}
	}
	if len(own) != len(allowed) {
		t.Errorf("own packages %q, want %q", own, allowed)
	}
}
