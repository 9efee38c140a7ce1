package matrix

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

var update = flag.Bool("update", false, "rewrite the compatibility table in docs/install.md from this run")

// The compatibility table in docs/install.md lies between these lines.
const (
	tableBegin = "<!-- compatibility table: written by `cd test && go test ./matrix -update`; do not edit -->"
	tableEnd   = "<!-- end of compatibility table -->"
)

// row is one release's results: check name -> passed.
type row struct {
	Version string
	Results map[string]bool
}

var compatTable = harness.DocTable{File: filepath.Join(harness.RepoDir(), "docs", "install.md"), Begin: tableBegin, End: tableEnd}

// renderTable renders the rows as a Markdown table, one column per check.
func renderTable(rows []row) string {
	var b strings.Builder
	b.WriteString("| Kubernetes | kube-apiserver tested | " + strings.Join(checks, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat(" --- |", len(checks)+2) + "\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s |", harness.MinorRelease(r.Version), r.Version)
		for _, c := range checks {
			mark := "yes"
			if !r.Results[c] {
				mark = "**no**"
			}
			b.WriteString(" " + mark + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// currentTable returns the table in docs/install.md.
func currentTable(t *testing.T) string {
	t.Helper()
	_, table, _, err := compatTable.Split()
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// checkTable compares the results of a complete run with docs/install.md, or rewrites it with
// -update.
func checkTable(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		if len(r.Results) != len(checks) {
			t.Logf("release %s did not run every check: the compatibility table is not compared", r.Version)
			return
		}
	}
	table := currentTable(t)
	want := renderTable(rows)
	if *update {
		if err := compatTable.Write(want); err != nil {
			t.Fatal(err)
		}
		return
	}
	if table != want {
		t.Errorf("the compatibility table in docs/install.md is stale; run `cd test && go test ./matrix -update`.\nhave:\n%swant:\n%s", table, want)
	}
}

// The table names exactly the releases of the matrix, and its columns are the current checks: a
// change to either without a run of the matrix (`-update`) fails here, without root.
func TestCompatibilityTableMatchesMatrix(t *testing.T) {
	table := currentTable(t)
	versions := harness.TableVersions(table)
	if !slices.Equal(versions, harness.MatrixVersions) {
		t.Errorf("docs/install.md's compatibility table lists %v, the matrix runs %v: run `cd test && go test ./matrix -update`",
			versions, harness.MatrixVersions)
	}
	header := strings.SplitN(renderTable(nil), "\n", 2)[0]
	if !strings.HasPrefix(table, header+"\n") {
		t.Errorf("docs/install.md's compatibility table has other columns than the matrix's checks; want header\n%s", header)
	}
}
