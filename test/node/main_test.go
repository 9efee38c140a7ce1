// Package node proves nodeaddr on a real node: the shipped manifests installed with kubectl on a
// kubelet + containerd + runc node inside a network namespace, with the DaemonSet controller and the
// scheduler placing the pods. Run it alone: `make test-node` (go test -p 1).
package node

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) {
	code := harness.MainE2E(m)
	if code == 0 {
		code = checkNodeTable()
	}
	if imageBinDir != "" {
		os.RemoveAll(imageBinDir)
	}
	printTable()
	os.Exit(code)
}

// row is one scenario's line in the summary table.
type row struct {
	name, result, figures string
}

var (
	tableMu sync.Mutex
	table   []row
)

// report records a scenario's figures; its result is read when t ends.
func report(t *testing.T, format string, args ...any) {
	figures := fmt.Sprintf(format, args...)
	t.Logf("figures: %s", figures)
	tableMu.Lock()
	i := len(table)
	table = append(table, row{name: t.Name(), figures: figures})
	tableMu.Unlock()
	t.Cleanup(func() {
		result := "PASS"
		if t.Failed() {
			result = "FAIL"
		} else if t.Skipped() {
			result = "SKIP"
		}
		tableMu.Lock()
		table[i].result = result
		tableMu.Unlock()
	})
}

// printTable prints one line per scenario (make test-node ends with it).
func printTable() {
	tableMu.Lock()
	defer tableMu.Unlock()
	if len(table) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("\nreal node scenarios:\n")
	for _, r := range table {
		fmt.Fprintf(&b, "  %-4s %-48s %s\n", r.result, r.name, r.figures)
	}
	fmt.Print(b.String())
}
