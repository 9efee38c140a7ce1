package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// Every top-level value of the chart has a row in docs/install-helm.md's table of the values besides the
// flags (the flags' rows are TestEveryFlagInChartAndDocs's): a value added without its row fails.
func TestEveryChartValueInInstallDoc(t *testing.T) {
	vb, err := os.ReadFile(filepath.Join(harness.ChartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(vb, &values); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(harness.RepoDir(), "docs", "install-helm.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\nValues besides the flags:\n")
	if !ok {
		t.Fatal(`docs/install-helm.md has no "Values besides the flags:" table`)
	}
	var first []string // the first cell of each row
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "|") {
			if len(first) > 0 {
				break
			}
			continue
		}
		first = append(first, strings.SplitN(line, "|", 3)[1])
	}
	for key := range values {
		if key == "config" {
			continue
		}
		if !slices.ContainsFunc(first, func(cell string) bool {
			return strings.Contains(cell, "`"+key+"`") || strings.Contains(cell, "`"+key+".")
		}) {
			t.Errorf("values.yaml %s: no row in docs/install-helm.md's \"Values besides the flags\" table", key)
		}
	}
}
