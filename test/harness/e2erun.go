package harness

import (
	"encoding/xml"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// E2EResult is one run of e2e.test read from its JUnit report: the specs that ran, by full name,
// sorted; Skipped holds the focused specs that skipped themselves at run time (e2eskipper: too
// few nodes, a missing feature) with the reason.
type E2EResult struct {
	Passed  []string
	Failed  map[string]string // name -> failure text (first lines)
	Skipped map[string]string // name -> skip message
	// Took is each spec's own time from the report (setup nodes excluded), by name.
	Took     map[string]time.Duration
	Duration time.Duration
	// Log is e2e.test's output; ReportDir holds junit_01.xml.
	Log, ReportDir string
}

// Run is how many specs ran (passed or failed).
func (r E2EResult) Run() int { return len(r.Passed) + len(r.Failed) }

// Summary is one line: run, passed, failed, skipped at run time.
func (r E2EResult) Summary() string {
	return fmt.Sprintf("%d run, %d passed, %d failed, %d skipped at run time (in %s)",
		r.Run(), len(r.Passed), len(r.Failed), len(r.Skipped), r.Duration.Round(time.Second))
}

// FocusRegexp turns spec names (or parts of them) into one --ginkgo.focus/--ginkgo.skip value.
func FocusRegexp(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return strings.Join(quoted, "|")
}

// E2EProcs is how many e2e.test processes share a focus list, as `ginkgo -p` shares a suite among
// its processes: the specs mostly wait on pods and the network (a two-node run leaves the machine
// about 75 % idle), so three processes take about a third of the wall time of one.
const E2EProcs = 3

// RunE2E runs the e2e suite (BuildE2E) against the cluster of kubeconfig with the specs whose
// names contain one of focus and none of skip, with kubectl from Build (the framework execs it)
// and the suite's images moved to E2ERegistry (KUBE_TEST_REPO_LIST). The focus list is dealt
// round-robin to E2EProcs processes of the suite, each with its own output file under the test's
// directory (its last lines are logged if a spec failed) and its own JUnit report, parsed and
// merged into the result. A process that wrote no report fails t.
func RunE2E(t testing.TB, kubeconfig string, focus, skip []string) E2EResult {
	t.Helper()
	suite := MustBuildE2E(t).Suite
	kubectl := MustBuild(t).Kubectl
	dir := t.TempDir()
	repoList := filepath.Join(dir, "repo-list.yaml")
	if err := os.WriteFile(repoList, []byte(E2ERepoList), 0o644); err != nil {
		t.Fatal(err)
	}
	groups := deal(focus, E2EProcs)
	parts := make([]E2EResult, len(groups))
	errs := make([]error, len(groups))
	start := time.Now()
	var wg sync.WaitGroup
	for i, g := range groups {
		parts[i] = E2EResult{Log: filepath.Join(dir, fmt.Sprintf("e2e-%d.log", i)), ReportDir: filepath.Join(dir, fmt.Sprintf("report-%d", i))}
		args := e2eArgs(kubeconfig, kubectl, parts[i].ReportDir, g, skip)
		t.Logf("e2e: %s %s (log: %s)", filepath.Base(suite), strings.Join(args, " "), parts[i].Log)
		wg.Go(func() { errs[i] = parts[i].run(suite, args, repoList, g, skip) })
	}
	wg.Wait()
	r := E2EResult{Failed: map[string]string{}, Skipped: map[string]string{}, Took: map[string]time.Duration{}, Duration: time.Since(start)}
	for i, p := range parts {
		if errs[i] != nil {
			t.Fatalf("e2e.test %v\nlast lines of %s:\n%s", errs[i], p.Log, tailFile(p.Log, 40))
		}
		r.Passed = append(r.Passed, p.Passed...)
		maps.Copy(r.Failed, p.Failed)
		maps.Copy(r.Skipped, p.Skipped)
		maps.Copy(r.Took, p.Took)
		if len(p.Failed) > 0 {
			t.Logf("e2e: %s; last lines of %s:\n%s", p.Summary(), p.Log, tailFile(p.Log, 40))
		}
	}
	sort.Strings(r.Passed)
	for _, name := range sortedKeys(r.Took) {
		t.Logf("e2e: %6.1fs %s", r.Took[name].Seconds(), name)
	}
	return r
}

// e2eArgs is one e2e.test process's command line.
func e2eArgs(kubeconfig, kubectl, reportDir string, focus, skip []string) []string {
	args := []string{"--kubeconfig=" + kubeconfig, "--provider=skeleton", "--kubectl-path=" + kubectl,
		"--report-dir=" + reportDir, "--dump-logs-on-failure=false",
		"--ginkgo.focus=" + FocusRegexp(focus), "--ginkgo.no-color", "--ginkgo.v", "--ginkgo.timeout=50m"}
	if len(skip) > 0 {
		args = append(args, "--ginkgo.skip="+FocusRegexp(skip))
	}
	return args
}

// run runs one e2e.test process into r.Log and reads its report into r; the error says why there
// is no usable report (a failing spec is in r.Failed, not an error).
func (r *E2EResult) run(suite string, args []string, repoList string, focus, skip []string) error {
	log, err := os.Create(r.Log)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(suite, args...)
	cmd.Dir = filepath.Dir(r.Log)
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+repoList)
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	runErr := cmd.Run()
	r.Duration = time.Since(start)
	if err := r.readJUnit(filepath.Join(r.ReportDir, "junit_01.xml"), focus, skip); err != nil {
		return fmt.Errorf("(%v) wrote no usable report: %w", runErr, err)
	}
	return nil
}

// deal splits items into at most n groups, round-robin (the focus list's slow specs, the
// two-node Granular Checks, are adjacent in it, so they spread over the processes).
func deal(items []string, n int) [][]string {
	groups := make([][]string, min(n, len(items)))
	for i, it := range items {
		groups[i%len(groups)] = append(groups[i%len(groups)], it)
	}
	return groups
}

// junitCase is the part of a ginkgo JUnit test case the result needs.
type junitCase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *struct {
		Text string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Text string `xml:",chardata"`
	} `xml:"error"`
}

// readJUnit fills the result from the report: the "[It]" specs only (not the suite's setup nodes),
// named without that prefix; a skipped spec counts only when it was focused (the others were
// filtered out, not run).
func (r *E2EResult) readJUnit(file string, focus, skip []string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var report struct {
		Suites []struct {
			Cases []junitCase `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &report); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	r.Failed, r.Skipped, r.Took = map[string]string{}, map[string]string{}, map[string]time.Duration{}
	for _, s := range report.Suites {
		for _, c := range s.Cases {
			r.add(c, focus, skip)
		}
	}
	sort.Strings(r.Passed)
	return nil
}

func (r *E2EResult) add(c junitCase, focus, skip []string) {
	name, isSpec := strings.CutPrefix(c.Name, "[It] ")
	if isSpec && c.Status != "skipped" && c.Status != "pending" {
		r.Took[name] = time.Duration(c.Time * float64(time.Second))
	}
	switch {
	case c.Status == "passed" && isSpec:
		r.Passed = append(r.Passed, name)
	case c.Status == "skipped" || c.Status == "pending":
		if isSpec && matchesAny(name, focus) && !matchesAny(name, skip) && c.Skipped != nil {
			r.Skipped[name] = c.Skipped.Message
		}
	case c.Status == "passed":
	default: // failed, panicked, interrupted, aborted, timedout; a failed setup node counts too
		text := c.Status
		if c.Failure != nil {
			text = c.Failure.Text
		} else if c.Error != nil {
			text = c.Error.Text
		}
		r.Failed[name] = firstLines(strings.TrimSpace(text), 12)
	}
}

func matchesAny(name string, parts []string) bool {
	for _, p := range parts {
		if strings.Contains(name, p) {
			return true
		}
	}
	return false
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
