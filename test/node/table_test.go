package node

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

var update = flag.Bool("update", false, "rewrite the real-node table in docs/install.md from this run "+
	"(it needs scenario 1 on every release of harness.NodeVersions)")

// The real-node table in docs/install.md (under the version matrix's compatibility table) lies
// between these lines. It is written from what scenario 1 saw on each release of
// harness.NodeVersions, and a complete run of both scenarios fails when it differs.
const (
	nodeTableBegin = "<!-- real node table: written by `cd test && go test -p 1 ./node -run 'TestRealNode/1-|TestFreshNodeOldestRelease/1-' -update`; do not edit -->"
	nodeTableEnd   = "<!-- end of real node table -->"
)

// freshResult is what scenario 1 saw on one release.
type freshResult struct {
	Registered, Published []corev1.NodeAddress
	Runtime               string
}

var (
	freshMu      sync.Mutex
	freshResults = map[string]freshResult{}
)

// recordFresh notes a passed scenario 1 on release version, with the Node's name to hide.
func recordFresh(version, node string, r freshResult) {
	r.Registered, r.Published = hideNodeName(r.Registered, node), hideNodeName(r.Published, node)
	freshMu.Lock()
	defer freshMu.Unlock()
	freshResults[version] = r
}

// hideNodeName replaces the Node's random name in Hostname entries with a placeholder.
func hideNodeName(addrs []corev1.NodeAddress, node string) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for _, a := range addrs {
		if a.Address == node {
			a.Address = "<node name>"
		}
		out = append(out, a)
	}
	return out
}

const nodeTableHeader = "| Kubernetes | every component tested (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet) | container runtime | Node registered by the kubelet with | Node after nodeaddr (shipped defaults), uninitialized taint removed |\n" +
	"| --- | --- | --- | --- | --- |\n"

// renderNodeTable renders one row per release of harness.NodeVersions.
func renderNodeTable(results map[string]freshResult) string {
	var b strings.Builder
	b.WriteString(nodeTableHeader)
	for _, v := range harness.NodeVersions {
		r := results[v]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", harness.MinorRelease(v), v, r.Runtime, addressList(r.Registered), addressList(r.Published))
	}
	return b.String()
}

func addressList(addrs []corev1.NodeAddress) string {
	if len(addrs) == 0 {
		return "no address"
	}
	var s []string
	for _, a := range addrs {
		s = append(s, fmt.Sprintf("%s `%s`", a.Type, a.Address))
	}
	return strings.Join(s, ", ")
}

var nodeTable = harness.DocTable{File: filepath.Join(harness.RepoDir(), "docs", "install.md"), Begin: nodeTableBegin, End: nodeTableEnd}

// checkNodeTable runs after the tests: with scenario 1 passed on every release it compares the
// table with docs/install.md, or rewrites it with -update. It returns the exit code.
func checkNodeTable() int {
	freshMu.Lock()
	defer freshMu.Unlock()
	for _, v := range harness.NodeVersions {
		if _, ok := freshResults[v]; !ok {
			if *update {
				fmt.Fprintf(os.Stderr, "-update: scenario 1 did not pass on %s in this run: docs/install.md not written\n", v)
				return 1
			}
			return 0 // not a complete run: nothing to compare
		}
	}
	_, table, _, err := nodeTable.Split()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	want := renderNodeTable(freshResults)
	if *update {
		if err := nodeTable.Write(want); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if table != want {
		fmt.Fprintf(os.Stderr, "FAIL: the real node table in docs/install.md is stale; run `cd test && go test -p 1 ./node -run 'TestRealNode/1-|TestFreshNodeOldestRelease/1-' -update`.\nhave:\n%swant:\n%s", table, want)
		return 1
	}
	return 0
}

// The real-node table names exactly harness.NodeVersions under the current header: a change to
// either without a run (`-update`) fails here, without root.
func TestNodeTableMatchesVersions(t *testing.T) {
	_, table, _, err := nodeTable.Split()
	if err != nil {
		t.Fatal(err)
	}
	if versions := harness.TableVersions(table); !slices.Equal(versions, harness.NodeVersions) {
		t.Errorf("docs/install.md's real node table lists %v, harness.NodeVersions is %v", harness.TableVersions(table), harness.NodeVersions)
	}
	if !strings.HasPrefix(table, nodeTableHeader) {
		t.Errorf("docs/install.md's real node table has another header than\n%s", nodeTableHeader)
	}
}
