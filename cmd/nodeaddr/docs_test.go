package main

// The facts the documentation states that drift with the code, checked against the code itself:
// every flag and its default in docs/configuration.md against the flag sets, the alerts against the
// rule files and the runbooks, the metric list in docs/metrics.md against the golden scrape and the
// metric definitions, the Helm values the docs name against the chart's values.yaml, every relative
// link and #anchor of the Markdown files (and the docs/FILE.md, "Heading" references of the
// manifests and the code), the length of the pages, the namespace of every kubectl command of the
// operator pages, the --help sections docs/configuration.md lists, each fact on one page (a copied
// snippet or sentence), and docs/BENCHMARKS.md carrying docs/bench/results.md as it is. Files only:
// no build, no cluster, fast.
//
// Each check is a function of the text, so TestDocsFactsCheckersFail can show that it fails on a
// broken fact.

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/nodeaddr/nodeaddr/internal/cmd/agentcmd"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// docsRepo is the repository root, from this package's directory.
const docsRepo = "../.."

func docRead(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(docsRepo, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ---- flags ----

// docSection returns the text of the "## heading" section of a Markdown page, up to the next "## ".
func docSection(page, heading string) string {
	_, s, ok := strings.Cut(page, "\n## "+heading+"\n")
	if !ok {
		return ""
	}
	s, _, _ = strings.Cut(s, "\n## ")
	return s
}

var docCodeSpanRE = regexp.MustCompile("`([^`]+)`")

// docFlagRow is one row of a flags table: its long names, its shorthands and a default per name.
type docFlagRow struct {
	line     string
	names    []string
	shorts   []string
	defaults []string
}

// docFlagRows parses the rows of a flags table ("| `--flag` / `--other` | default | meaning |").
func docFlagRows(section string) []docFlagRow {
	var rows []docFlagRow
	for _, l := range strings.Split(section, "\n") {
		if !strings.HasPrefix(l, "| `-") {
			continue
		}
		cells := docCells(l)
		if len(cells) < 3 {
			continue
		}
		r := docFlagRow{line: l}
		for _, m := range docCodeSpanRE.FindAllStringSubmatch(cells[0], -1) {
			switch c := m[1]; {
			case strings.HasPrefix(c, "--"):
				r.names = append(r.names, strings.TrimPrefix(c, "--"))
			case len(c) == 2 && c[0] == '-':
				r.shorts = append(r.shorts, c[1:])
			}
		}
		r.defaults = []string{strings.TrimSpace(cells[1])}
		if parts := strings.Split(cells[1], " / "); len(r.names) > 1 && len(parts) == len(r.names) {
			r.defaults = parts
		}
		rows = append(rows, r)
	}
	return rows
}

// docCells splits a table row into its trimmed cells; a '|' inside a code span is text.
func docCells(row string) []string {
	var cells []string
	var cell strings.Builder
	inCode := false
	for _, r := range strings.TrimSpace(row) {
		switch {
		case r == '`':
			inCode = !inCode
		case r == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
			continue
		}
		cell.WriteRune(r)
	}
	cells = append(cells, strings.TrimSpace(cell.String()))
	// The row's leading and trailing '|' leave an empty first and last cell.
	if len(cells) >= 2 {
		cells = cells[1 : len(cells)-1]
	}
	return cells
}

// docFlag is what a flag set says of one flag.
type docFlag struct {
	name, short, def, usage string
	hidden                  bool
}

func docFlagsOf(fs *pflag.FlagSet) map[string]docFlag {
	m := map[string]docFlag{}
	fs.VisitAll(func(f *pflag.Flag) {
		m[f.Name] = docFlag{f.Name, f.Shorthand, f.DefValue, f.Usage, f.Hidden || f.Deprecated != ""}
	})
	return m
}

// docUsageLineRE is a line of pflag's FlagUsages: "  -o, --output string   text (default "x")".
var docUsageLineRE = regexp.MustCompile(`^\s+(?:-([A-Za-z0-9]), )?--([a-z0-9-]+)\b(.*)$`)

// docFlagsOfUsage reads the flags from pflag's usage text (for the approver, whose flag set is local).
func docFlagsOfUsage(usage string) map[string]docFlag {
	m := map[string]docFlag{}
	for _, l := range strings.Split(usage, "\n") {
		g := docUsageLineRE.FindStringSubmatch(l)
		if g == nil {
			continue
		}
		f := docFlag{name: g[2], short: g[1], usage: g[3], hidden: g[2] == "help"}
		if i := strings.LastIndex(g[3], "(default "); i >= 0 && strings.HasSuffix(g[3], ")") {
			f.def = strings.TrimSuffix(g[3][i+len("(default "):], ")")
			if u, err := strconv.Unquote(f.def); err == nil {
				f.def = u
			}
		}
		m[f.name] = f
	}
	return m
}

// docDefaultMatches reports whether a flags table's default cell states the flag's default.
func docDefaultMatches(cell string, f docFlag) bool {
	cell = strings.TrimSpace(cell)
	zero := f.def == "" || f.def == "false" || f.def == "0" || f.def == "0s" || f.def == "[]"
	if cell == "" {
		return zero
	}
	first := cell
	if m := docCodeSpanRE.FindStringSubmatch(cell); m != nil && strings.HasPrefix(cell, "`") {
		first = m[1]
	} else if w := strings.Fields(cell); len(w) > 0 {
		first = strings.Trim(w[0], ",;")
	}
	switch {
	case strings.HasPrefix(first, "$"): // an environment variable the flag's help names
		v := strings.TrimRight(strings.TrimPrefix(first, "$"), ",")
		return (f.def == "" || f.def == "[]") && strings.Contains(f.usage, v)
	case first == "empty" || first == "none":
		return f.def == "" || f.def == "[]"
	case first == f.def:
		return true
	}
	if a, err := time.ParseDuration(first); err == nil {
		if b, err := time.ParseDuration(f.def); err == nil {
			return a == b
		}
	}
	if a, err := strconv.ParseFloat(first, 64); err == nil {
		if b, err := strconv.ParseFloat(f.def, 64); err == nil {
			return a == b
		}
	}
	// A flag whose empty value means a default its help spells out (the targets).
	return f.def == "" && strings.Contains(f.usage, first)
}

// checkFlagTable compares a flags table with a flag set: every documented flag exists with the
// documented shorthand and default, and every flag --help shows is documented.
func checkFlagTable(table string, flags map[string]docFlag) []string {
	var errs []string
	documented := map[string]bool{}
	rows := docFlagRows(table)
	if len(rows) < 5 {
		return []string{fmt.Sprintf("only %d flag rows found: is the table still there?", len(rows))}
	}
	for _, r := range rows {
		for i, name := range r.names {
			documented[name] = true
			f, ok := flags[name]
			if !ok {
				errs = append(errs, fmt.Sprintf("--%s: documented, but no such flag", name))
				continue
			}
			def := r.defaults[0]
			if len(r.defaults) == len(r.names) {
				def = r.defaults[i]
			}
			if !docDefaultMatches(def, f) {
				errs = append(errs, fmt.Sprintf("--%s: documented default %q, the flag's is %q", name, def, f.def))
			}
		}
		for _, s := range r.shorts {
			if !slices.ContainsFunc(r.names, func(n string) bool { return flags[n].short == s }) {
				errs = append(errs, fmt.Sprintf("-%s: documented as the shorthand of %v, which has none", s, r.names))
			}
		}
		for _, n := range r.names {
			if f := flags[n]; f.short != "" && !slices.Contains(r.shorts, f.short) {
				errs = append(errs, fmt.Sprintf("--%s: its shorthand -%s is not documented", n, f.short))
			}
		}
	}
	for name, f := range flags {
		if !f.hidden && !documented[name] {
			errs = append(errs, fmt.Sprintf("--%s: in --help, not in the table", name))
		}
	}
	slices.Sort(errs)
	return errs
}

// docShortFlagsRE finds configuration.md's sentence naming the flags that have a one-letter form.
var docShortFlagsRE = regexp.MustCompile(`\(only ([^)]*?) ha(?:ve|s) one\)`)

// checkShortFlagsSentence compares that sentence with the shorthands of the flag set (and pflag's -h).
func checkShortFlagsSentence(page string, flags map[string]docFlag) []string {
	m := docShortFlagsRE.FindStringSubmatch(strings.Join(strings.Fields(page), " "))
	if m == nil {
		return []string{"configuration.md: no sentence \"(only `-h` ... have one)\" naming the one-letter flags"}
	}
	var said []string
	for _, c := range docCodeSpanRE.FindAllStringSubmatch(m[1], -1) {
		said = append(said, strings.TrimLeft(strings.SplitN(c[1], "=", 2)[0], "-"))
	}
	want := []string{"h"}
	for _, f := range flags {
		if f.short != "" && !f.hidden {
			want = append(want, f.short)
		}
	}
	slices.Sort(said)
	slices.Sort(want)
	if !slices.Equal(said, want) {
		return []string{fmt.Sprintf("configuration.md says only %v have a one-letter form; the flags have %v", said, want)}
	}
	return nil
}

func TestDocsFlagsTable(t *testing.T) {
	page := docRead(t, "docs/configuration.md")
	agent := docFlagsOf(agentcmd.FlagSet(func(string) string { return "" }))
	for _, e := range checkFlagTable(docSection(page, "Flags"), agent) {
		t.Errorf("docs/configuration.md, \"Flags\": %s", e)
	}
	for _, e := range checkShortFlagsSentence(docSection(page, "Flags"), agent) {
		t.Error(e)
	}
	var usage bytes.Buffer
	if code := run(t.Context(), []string{"approver", "--help"}, func(string) string { return "" }, &usage, io.Discard); code != 0 {
		t.Fatalf("nodeaddr approver --help: exit %d", code)
	}
	approver := docFlagsOfUsage(usage.String())
	if len(approver) < 5 {
		t.Fatalf("only %d flags read from nodeaddr approver --help:\n%s", len(approver), usage.String())
	}
	cluster := docRead(t, "docs/cluster.md")
	for _, e := range checkFlagTable(docSection(cluster, "The approver: `nodeaddr approver`"), approver) {
		t.Errorf("docs/cluster.md, \"The approver\": %s", e)
	}
	usage.Reset()
	if code := run(t.Context(), []string{"conflicts", "--help"}, func(string) string { return "" }, &usage, io.Discard); code != 0 {
		t.Fatalf("nodeaddr conflicts --help: exit %d", code)
	}
	for _, e := range checkFlagTable(docSection(cluster, "The conflict detector: `nodeaddr conflicts`"), docFlagsOfUsage(usage.String())) {
		t.Errorf("docs/cluster.md, \"The conflict detector\": %s", e)
	}
	usage.Reset()
	if code := run(t.Context(), []string{"remediator", "--help"}, func(string) string { return "" }, &usage, io.Discard); code != 0 {
		t.Fatalf("nodeaddr remediator --help: exit %d", code)
	}
	remediator := docFlagsOfUsage(usage.String())
	if len(remediator) < 8 {
		t.Fatalf("only %d flags read from nodeaddr remediator --help:\n%s", len(remediator), usage.String())
	}
	for _, e := range checkFlagTable(docSection(docRead(t, "docs/remediation.md"), "Flags"), remediator) {
		t.Errorf("docs/remediation.md, \"Flags\": %s", e)
	}
}

// ---- alerts ----

var (
	docAlertRE       = regexp.MustCompile(`(?m)^\s*-\s*alert:\s*(\S+)\s*$`)
	docRunbookRE     = regexp.MustCompile(`(?m)^## (Nodeaddr[A-Za-z0-9]+)\s*$`)
	docAlertCountRE  = regexp.MustCompile(`(?i)\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen) (?:alerts|alert rules|runbooks)\b`)
	docNumberWords   = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen"}
	docTaintOverRE   = regexp.MustCompile(`>\s*(\d+)\s*\)`)
	docForMinutesRE  = regexp.MustCompile(`(?m)^\s*for:\s*(\d+)m\s*$`)
	docTaintAlertKey = "NodeaddrUninitializedTaintStuck"
)

func docAlerts(rules string) []string {
	var names []string
	for _, m := range docAlertRE.FindAllStringSubmatch(rules, -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	return names
}

// checkAlerts: the chart's rules are the kustomize rules, every alert has a runbook heading and
// every runbook heading an alert, and a number of alerts a page states is the count of the rules.
func checkAlerts(rules, chartRules, runbooks string, pages map[string]string) []string {
	var errs []string
	names := docAlerts(rules)
	if len(names) == 0 {
		return []string{"deploy/monitoring/prometheusrule.yaml: no alert found"}
	}
	if chart := docAlerts(chartRules); !slices.Equal(chart, names) {
		errs = append(errs, fmt.Sprintf("the chart's rules name %v, deploy/monitoring's %v", chart, names))
	}
	var headings []string
	for _, m := range docRunbookRE.FindAllStringSubmatch(runbooks, -1) {
		headings = append(headings, m[1])
	}
	slices.Sort(headings)
	for _, n := range names {
		if !slices.Contains(headings, n) {
			errs = append(errs, fmt.Sprintf("alert %s: no \"## %s\" runbook in docs/runbooks.md", n, n))
		}
	}
	for _, h := range headings {
		if !slices.Contains(names, h) {
			errs = append(errs, fmt.Sprintf("docs/runbooks.md: runbook %s for an alert the rules do not have", h))
		}
	}
	for _, file := range slices.Sorted(maps.Keys(pages)) {
		text := strings.Join(strings.Fields(pages[file]), " ")
		for _, m := range docAlertCountRE.FindAllStringSubmatch(text, -1) {
			if n := slices.Index(docNumberWords, strings.ToLower(m[1])); n != len(names) {
				errs = append(errs, fmt.Sprintf("%s: %q, but the rules have %d alerts", file, m[0], len(names)))
			}
		}
	}
	return errs
}

// checkTaintAlertTiming: troubleshooting.md says when the taint alert fires, which is its rule's
// uptime condition plus its `for`.
func checkTaintAlertTiming(rules, troubleshooting string) ([]string, bool) {
	_, block, ok := strings.Cut(rules, "alert: "+docTaintAlertKey)
	if !ok {
		return nil, false
	}
	if i := strings.Index(block, "- alert:"); i >= 0 {
		block = block[:i]
	}
	over, forMin := docTaintOverRE.FindStringSubmatch(block), docForMinutesRE.FindStringSubmatch(block)
	if over == nil || forMin == nil {
		return nil, false
	}
	s, _ := strconv.Atoi(over[1])
	f, _ := strconv.Atoi(forMin[1])
	want := fmt.Sprintf("%d minutes after the agent started", s/60+f)
	if !strings.Contains(strings.Join(strings.Fields(troubleshooting), " "), want) {
		return []string{fmt.Sprintf("docs/troubleshooting.md does not say the %s alert fires %q (%d s of uptime, then for: %dm)", docTaintAlertKey, want, s, f)}, true
	}
	return nil, true
}

// docPages are the operator-facing pages whose statements are checked: README.md and docs/*.md.
func docPages(t *testing.T) map[string]string {
	t.Helper()
	pages := map[string]string{"README.md": docRead(t, "README.md")}
	files, err := filepath.Glob(filepath.Join(docsRepo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		pages["docs/"+filepath.Base(f)] = docRead(t, "docs/"+filepath.Base(f))
	}
	return pages
}

func TestDocsAlerts(t *testing.T) {
	rules := docRead(t, "deploy/monitoring/prometheusrule.yaml")
	for _, e := range checkAlerts(rules, docRead(t, "deploy/helm/nodeaddr/files/prometheusrule-groups.yaml"),
		docRead(t, "docs/runbooks.md"), docPages(t)) {
		t.Error(e)
	}
	errs, checked := checkTaintAlertTiming(rules, docRead(t, "docs/troubleshooting.md"))
	if !checked {
		t.Logf("%s: no uptime threshold and `for` in minutes found in its rule; its timing is not checked", docTaintAlertKey)
	}
	for _, e := range errs {
		t.Error(e)
	}
}

// ---- metrics ----

var (
	docMetricRE     = regexp.MustCompile(`\b((?:nodeaddr|rest_client)_[a-z0-9_]*[a-z0-9])\b`)
	docTypeRE       = regexp.MustCompile(`(?m)^# TYPE ((?:nodeaddr|rest_client)_[a-z0-9_]+) `)
	docDefinedRE    = regexp.MustCompile(`Name:\s*"(nodeaddr_[a-z0-9_]+)"`)
	docSeriesSuffix = []string{"_bucket", "_sum", "_count"}
)

// checkMetrics: the page names every family of the golden scrapes and every metric the code
// defines, and names no metric that neither has.
func checkMetrics(page string, golden []string, defined []string) []string {
	var errs []string
	named := map[string]bool{}
	for _, m := range docMetricRE.FindAllStringSubmatch(page, -1) {
		named[m[1]] = true
	}
	known := map[string]bool{}
	for _, n := range append(slices.Clone(golden), defined...) {
		known[n] = true
	}
	for _, n := range golden {
		if !named[n] {
			errs = append(errs, fmt.Sprintf("%s: in the golden /metrics, not in docs/metrics.md", n))
		}
	}
	for _, n := range defined {
		if !named[n] {
			errs = append(errs, fmt.Sprintf("%s: defined in the code, not in docs/metrics.md", n))
		}
	}
	for n := range named {
		base := n
		for _, s := range docSeriesSuffix {
			if b, ok := strings.CutSuffix(n, s); ok && known[b] {
				base = b
			}
		}
		if !known[base] {
			errs = append(errs, fmt.Sprintf("%s: named in docs/metrics.md, but no such metric", n))
		}
	}
	slices.Sort(errs)
	return errs
}

func TestDocsMetrics(t *testing.T) {
	var golden []string
	for _, f := range []string{"test/alerts/testdata/metrics.golden", "test/alerts/testdata/metrics-approval.golden",
		"test/alerts/testdata/metrics-remediation.golden"} {
		for _, m := range docTypeRE.FindAllStringSubmatch(docRead(t, f), -1) {
			golden = append(golden, m[1])
		}
	}
	if len(golden) < 10 {
		t.Fatalf("only %d metric families in the golden files", len(golden))
	}
	var defined []string
	err := filepath.WalkDir(docsRepo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "test" || d.Name() == ".git" || strings.HasPrefix(d.Name(), ".")) && p != docsRepo {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range docDefinedRE.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(defined, m[1]) {
				defined = append(defined, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range checkMetrics(docRead(t, "docs/metrics.md"), golden, defined) {
		t.Error(e)
	}
}

// ---- Helm values ----

var (
	docSetRE      = regexp.MustCompile(`--set(?:-string)?[ =]'?([A-Za-z][A-Za-z0-9_.]*)(?:\[\d+\])?=`)
	docValuePathR = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(?:\.(?:[A-Za-z][A-Za-z0-9]*|\*))+$`)
	docNotValue   = []string{"yaml", "yml", "json", "md", "go", "txt", "tpl", "io", "com", "k8s", "sh", "crt", "key"}
)

// docValuePaths returns the chart values a page names: `a.b.c` code spans whose first part is a
// top-level value (a relative `.x` after one in the same line is its sibling), and --set keys.
func docValuePaths(page string, top map[string]any) []string {
	var paths []string
	for _, l := range strings.Split(page, "\n") {
		for _, m := range docSetRE.FindAllStringSubmatch(l, -1) {
			paths = append(paths, m[1])
		}
		last := ""
		for _, m := range docCodeSpanRE.FindAllStringSubmatch(l, -1) {
			c := strings.TrimSpace(m[1])
			c, _, _ = strings.Cut(c, "=")
			if strings.HasPrefix(c, ".") && last != "" {
				c = last[:strings.LastIndex(last, ".")] + c
			}
			if !docValuePathR.MatchString(c) {
				continue
			}
			parts := strings.Split(c, ".")
			if _, ok := top[parts[0]]; !ok || slices.ContainsFunc(parts[1:], func(p string) bool { return slices.Contains(docNotValue, p) }) {
				continue
			}
			last = c
			paths = append(paths, c)
		}
	}
	return paths
}

// docValueExists walks values.yaml along path; a map left empty in values.yaml (labels,
// annotations) or a leaf reached early (a list, an object passed through) takes any key below it.
func docValueExists(values map[string]any, path string) bool {
	var cur any = values
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok || p == "*" {
			return true
		}
		next, ok := m[p]
		if !ok {
			return len(m) == 0
		}
		cur = next
	}
	return true
}

func checkHelmValues(pages map[string]string, values map[string]any) ([]string, int) {
	var errs []string
	n := 0
	for file, page := range pages {
		for _, p := range docValuePaths(page, values) {
			n++
			if !docValueExists(values, p) {
				errs = append(errs, fmt.Sprintf("%s: names the Helm value %s, which deploy/helm/nodeaddr/values.yaml does not have", file, p))
			}
		}
	}
	slices.Sort(errs)
	return slices.Compact(errs), n
}

func TestDocsHelmValues(t *testing.T) {
	var values map[string]any
	if err := yaml.Unmarshal([]byte(docRead(t, "deploy/helm/nodeaddr/values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	errs, n := checkHelmValues(docPages(t), values)
	if n < 30 {
		t.Errorf("only %d Helm values found in the docs: is the parser broken?", n)
	}
	for _, e := range errs {
		t.Error(e)
	}
}

// ---- links and page length ----

var (
	docFenceRE       = regexp.MustCompile("^\\s*(```|~~~)")
	docSpanRE        = regexp.MustCompile("``[^`]+``|`[^`]+`")
	docLinkRE        = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	docHeadingRE     = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	docHeadingLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	// docQuotedRefRE is a reference outside Markdown: docs/FILE.md, optionally with "Heading".
	docQuotedRefRE = regexp.MustCompile(`docs/([a-z0-9/_-]+\.md)(?:,?\s+"([^"]+)")?`)
	// docFragmentMark makes a page's links relative to docs/: a part of BENCHMARKS.md.
	docFragmentMark = "<!-- A part of docs/BENCHMARKS.md"
)

func docProse(text string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		if docFenceRE.MatchString(l) {
			in = !in
			continue
		}
		if !in {
			out = append(out, l)
		}
	}
	return out
}

// docSlug is the anchor GitHub gives a heading's text.
func docSlug(text string) string {
	text = docHeadingLinkRE.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func docAnchors(text string) []string {
	seen := map[string]int{}
	var anchors []string
	for _, l := range docProse(text) {
		m := docHeadingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := docSlug(m[1])
		if k := seen[a]; k > 0 {
			anchors = append(anchors, a+"-"+strconv.Itoa(k))
		} else {
			anchors = append(anchors, a)
		}
		seen[a]++
	}
	return anchors
}

// docFS is the repository's files as the link checker sees them: a path relative to the root → text
// (Markdown only) or "" (any other file or a directory).
type docFS map[string]string

func (d docFS) exists(p string) bool { _, ok := d[p]; return ok }

// brokenDocLinks returns every broken relative link of the Markdown file rel, and how many it checked.
func brokenDocLinks(files docFS, rel string) ([]string, int) {
	text := files[rel]
	dir := filepath.ToSlash(filepath.Dir(rel))
	if strings.HasPrefix(text, docFragmentMark) {
		dir = "docs"
	}
	var broken []string
	n := 0
	for _, l := range docProse(text) {
		l = docSpanRE.ReplaceAllString(l, "`code`")
		for _, m := range docLinkRE.FindAllStringSubmatch(l, -1) {
			target := m[1]
			if strings.Contains(target, ":") && !strings.HasPrefix(target, "#") {
				continue
			}
			n++
			file, anchor, _ := strings.Cut(target, "#")
			resolved := rel
			if file != "" {
				resolved = filepath.ToSlash(filepath.Clean(filepath.Join(dir, file)))
				if !files.exists(resolved) {
					broken = append(broken, fmt.Sprintf("%s: %s: no such file", rel, target))
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(resolved, ".md") && !slices.Contains(docAnchors(files[resolved]), anchor) {
				broken = append(broken, fmt.Sprintf("%s: %s: no heading with that anchor", rel, target))
			}
		}
	}
	return broken, n
}

// brokenQuotedRefs checks the docs/FILE.md, "Heading" references of a non-Markdown file (comments
// wrapped over several lines are joined first).
func brokenQuotedRefs(files docFS, rel, text string) []string {
	joined := regexp.MustCompile(`\s*\n\s*(?:#|//)?\s*`).ReplaceAllString(text, " ")
	var broken []string
	for _, m := range docQuotedRefRE.FindAllStringSubmatch(joined, -1) {
		doc := "docs/" + m[1]
		if !files.exists(doc) {
			broken = append(broken, fmt.Sprintf("%s: %s: no such file", rel, doc))
			continue
		}
		if m[2] != "" && !slices.Contains(docAnchors(files[doc]), docSlug(m[2])) {
			broken = append(broken, fmt.Sprintf("%s: %s, %q: no such heading", rel, doc, m[2]))
		}
	}
	return broken
}

// docMaxLines is the longest a page of docs/ may be; docLongPages are the exceptions, each with why.
const docMaxLines = 300

var docLongPages = map[string]string{}

func loadDocFS(t *testing.T) docFS {
	t.Helper()
	files := docFS{}
	err := filepath.WalkDir(docsRepo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(docsRepo, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "test/.cache" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		files[rel] = ""
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestDocsLinksAndLength(t *testing.T) {
	files := loadDocFS(t)
	var pages []string
	for rel := range files {
		if rel == "README.md" || rel == "CONTRIBUTING.md" || rel == "SECURITY.md" || rel == "deploy/helm/nodeaddr/README.md" ||
			(strings.HasPrefix(rel, "docs/") && strings.HasSuffix(rel, ".md")) {
			pages = append(pages, rel)
		}
	}
	slices.Sort(pages)
	links := 0
	for _, rel := range pages {
		broken, n := brokenDocLinks(files, rel)
		links += n
		for _, b := range broken {
			t.Error(b)
		}
		if strings.HasPrefix(rel, "docs/") {
			if lines := strings.Count(files[rel], "\n"); lines > docMaxLines && docLongPages[rel] == "" {
				t.Errorf("%s: %d lines, over %d: split it by subject", rel, lines, docMaxLines)
			}
		}
	}
	if links < 200 {
		t.Errorf("only %d relative links checked: is the parser broken?", links)
	}
	// References to the docs from the manifests, the chart, the main module's code and the Makefile.
	refs := 0
	for rel := range files {
		code := strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") && !strings.HasPrefix(rel, "test/")
		wanted := strings.HasPrefix(rel, "deploy/") || code || rel == "Makefile"
		if !wanted || strings.HasSuffix(rel, ".md") || strings.HasSuffix(rel, ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(docsRepo, rel))
		if err != nil {
			continue // a directory
		}
		refs += len(docQuotedRefRE.FindAllString(string(b), -1))
		for _, e := range brokenQuotedRefs(files, rel, string(b)) {
			t.Error(e)
		}
	}
	if refs < 20 {
		t.Errorf("only %d docs/ references found in deploy/, the Go code and the Makefile: is the parser broken?", refs)
	}
}

// docIssueRE is a citation of this project's issue tracker ("issue 31", "issues 17 and 24"): the
// docs state what is true, not where it was asked for; CHANGELOG.md may cite them.
var docIssueRE = regexp.MustCompile(`\b[Ii]ssues? #?[0-9]+\b`)

func checkNoIssueNumbers(rel, text string) []string {
	var errs []string
	for i, l := range strings.Split(text, "\n") {
		if m := docIssueRE.FindString(l); m != "" {
			errs = append(errs, fmt.Sprintf("%s:%d: cites %q", rel, i+1, m))
		}
	}
	return errs
}

func TestDocsCiteNoIssueNumbers(t *testing.T) {
	files := loadDocFS(t)
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		if rel == "README.md" || (strings.HasPrefix(rel, "docs/") && strings.HasSuffix(rel, ".md")) {
			for _, e := range checkNoIssueNumbers(rel, files[rel]) {
				t.Error(e)
			}
		}
	}
}

// ---- the results page carries its hand-kept part ----

// checkBenchmarksPart: docs/BENCHMARKS.md, which `make bench` assembles, carries docs/bench/results.md
// as it is (the Makefile copies it between the run's reports and the micro-benchmarks), so a result
// lives in one file: a table changed on the page alone would be lost at the next `make bench`, and
// one changed in results.md alone would not be published.
func checkBenchmarksPart(page, part string) []string {
	if !strings.HasPrefix(part, docFragmentMark) {
		return []string{"docs/bench/results.md does not start with " + docFragmentMark + " -->"}
	}
	if !strings.Contains(page, part) {
		return []string{"docs/BENCHMARKS.md does not carry docs/bench/results.md as it is: edit results.md, then copy it into the page (or run make bench)"}
	}
	return nil
}

func TestDocsBenchmarksCarryResults(t *testing.T) {
	for _, e := range checkBenchmarksPart(docRead(t, "docs/BENCHMARKS.md"), docRead(t, "docs/bench/results.md")) {
		t.Error(e)
	}
}

// ---- each fact on one page ----

// docOneHome names the snippets an operator copies that live on one page each (or one page per form):
// another page that needs one links there. Only fenced code counts: prose may name them.
var docOneHome = map[string][]string{
	// Changing who may scrape /metrics: metrics.md, "Who may scrape".
	`"data":{"metrics-allowed-scrapers":`: {"docs/metrics.md"},
	// The scraper token's projected volume: metrics.md, "Scraper tokens" (the Prometheus resource), and
	// the stack's values in kube-prometheus-stack.md (which test/monitoring applies).
	"audience: nodeaddr": {"docs/metrics.md", "docs/kube-prometheus-stack.md"},
	// Pinning a release's image by digest: install.md, "Verify and pin by digest".
	"digest: ": {"docs/install.md"},
}

// docSentenceWords is the length from which a sentence found on two pages is a copied fact.
const docSentenceWords = 12

// checkFactsOnce: no page copies another's snippet (docOneHome), and no sentence of
// docSentenceWords words or more is on two pages.
func checkFactsOnce(pages map[string]string, homes map[string][]string) []string {
	var errs []string
	seen := map[string]string{}
	for _, file := range slices.Sorted(maps.Keys(pages)) {
		text := pages[file]
		for marker, home := range homes {
			if slices.Contains(home, file) {
				continue
			}
			inFence := false
			for _, l := range strings.Split(text, "\n") {
				if docFenceRE.MatchString(l) {
					inFence = !inFence
				} else if inFence && strings.Contains(l, marker) {
					errs = append(errs, fmt.Sprintf("%s: copies the snippet %q, which lives on %v: link it", file, marker, home))
					break
				}
			}
		}
		for _, para := range strings.Split(strings.Join(docProse(text), "\n"), "\n\n") {
			para = strings.Join(strings.Fields(para), " ")
			for _, sentence := range docSentenceRE.Split(para, -1) {
				if len(strings.Fields(sentence)) < docSentenceWords {
					continue
				}
				if other, ok := seen[sentence]; ok && other != file {
					errs = append(errs, fmt.Sprintf("%s repeats a sentence of %s: %q", file, other, sentence))
				}
				seen[sentence] = file
			}
		}
	}
	slices.Sort(errs)
	return slices.Compact(errs)
}

// docSentenceRE splits a paragraph after a sentence's end.
var docSentenceRE = regexp.MustCompile(`[.:;]\s+`)

// Each fact on one page, linked from the others: a snippet on its home page only, and no sentence
// copied from page to page. docs/BENCHMARKS.md is left out: make bench assembles it from reports
// that state their method.
func TestDocsFactsOnce(t *testing.T) {
	pages := docPages(t)
	delete(pages, "docs/BENCHMARKS.md")
	for _, e := range checkFactsOnce(pages, docOneHome) {
		t.Error(e)
	}
}

// ---- the link checker on its own ----

// The link checker reports a missing file, a missing anchor in another file and in the same
// file, and accepts GitHub's slugs (punctuation dropped, duplicates numbered), code spans and
// fenced code, so a link test that passes means something.
func TestDocsLinkCheckerFindsBrokenLinks(t *testing.T) {
	files := docFS{"docs": ""}
	files["docs/target.md"] = "# Target\n\n## The kubelet `--cloud-provider=external`\n\n## Repeated\n\n## Repeated\n\n" +
		"## ExternalIP behind NAT: STUN (RFC 8489)\n\n```\n## not a heading\n```\n"
	files["README.md"] = strings.Join([]string{
		"# Top",
		"[ok](docs/target.md) [ok](docs/target.md#the-kubelet---cloud-providerexternal)",
		"[ok](docs/target.md#repeated-1) [ok](docs/target.md#externalip-behind-nat-stun-rfc-8489) [ok](#top)",
		"[ok](docs/) [web](https://example.invalid/missing) `[code](missing.md)`",
		"[`--flag`](docs/target.md#target \"title\")",
		"```",
		"[fenced](missing.md)",
		"```",
		"[gone](docs/missing.md) [bad anchor](docs/target.md#repeated-2) [self](#nowhere)",
		"[fence heading](docs/target.md#not-a-heading)",
	}, "\n") + "\n"
	broken, n := brokenDocLinks(files, "README.md")
	want := []string{
		"README.md: docs/missing.md: no such file",
		"README.md: docs/target.md#repeated-2: no heading with that anchor",
		"README.md: #nowhere: no heading with that anchor",
		"README.md: docs/target.md#not-a-heading: no heading with that anchor",
	}
	if !slices.Equal(broken, want) {
		t.Errorf("broken links:\n%s\nwant:\n%s", strings.Join(broken, "\n"), strings.Join(want, "\n"))
	}
	if n != 11 {
		t.Errorf("%d relative links checked, want 11", n)
	}
}

// ---- kubectl commands and --help sections ----

// docNamespacedKinds are the resource names (and short names) of namespaced objects a doc's kubectl
// command may name; `$POD` is the runbooks' variable holding `pod/NAME`.
var docNamespacedKinds = map[string]bool{
	"pod": true, "pods": true, "po": true, "$pod": true, "event": true, "events": true, "ev": true,
	"daemonset": true, "daemonsets": true, "ds": true, "service": true, "services": true, "svc": true,
	"servicemonitor": true, "servicemonitors": true, "prometheusrule": true, "prometheusrules": true,
	"configmap": true, "configmaps": true, "cm": true, "serviceaccount": true, "serviceaccounts": true,
	"sa": true, "secret": true, "secrets": true, "role": true, "roles": true, "rolebinding": true,
	"rolebindings": true, "deployment": true, "deployments": true, "deploy": true,
}

// docKubectlValueFlags take the next word as their value when written without '='.
var docKubectlValueFlags = map[string]bool{
	"-n": true, "--namespace": true, "-l": true, "--selector": true, "-o": true, "--output": true,
	"--field-selector": true, "-c": true, "--container": true, "--as": true, "--kubeconfig": true,
	"--context": true, "-k": true, "--kustomize": true, "-f": true, "--filename": true,
}

// docKubectlNeedsNamespace reports whether a kubectl command line (the words after "kubectl") acts on a
// namespaced object without saying in which namespace (-n, --namespace or -A): run as written, it
// would look in the kubeconfig's default namespace and find nothing.
func docKubectlNeedsNamespace(args []string) bool {
	var words []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-A" || a == "--all-namespaces" || a == "-n" || a == "--namespace" ||
			strings.HasPrefix(a, "--namespace=") || (strings.HasPrefix(a, "-n") && len(a) > 2 && !strings.HasPrefix(a, "--")):
			return false
		case docKubectlValueFlags[a]:
			i++
		case strings.HasPrefix(a, "-"):
		default:
			words = append(words, a)
		}
	}
	if len(words) == 0 {
		return false
	}
	resource := ""
	switch words[0] {
	case "logs", "exec", "attach", "port-forward", "cp":
		return true
	case "get", "describe", "delete", "edit", "patch", "label", "annotate", "wait", "scale":
		if len(words) > 1 {
			resource = words[1]
		}
	case "rollout": // rollout status|restart|undo KIND/NAME
		if len(words) > 2 {
			resource = words[2]
		}
	}
	for _, r := range strings.Split(resource, ",") {
		kind, _, _ := strings.Cut(strings.ToLower(r), "/")
		if docNamespacedKinds[kind] {
			return true
		}
	}
	return false
}

// docKubectlCommands returns the kubectl command lines of a Markdown file: those in fenced code blocks
// (continuation lines joined, shell comments cut) and inline code spans that start with "kubectl"
// and have arguments, each as the words after "kubectl", by line number.
func docKubectlCommands(text string) map[int][]string {
	cmds := map[int][]string{}
	add := func(n int, s string) {
		for {
			i := strings.Index(s, "kubectl ")
			if i < 0 {
				return
			}
			s = s[i+len("kubectl "):]
			end := strings.IndexAny(s, ")|;#&")
			cmd := s
			if end >= 0 {
				cmd = s[:end]
			}
			cmds[n] = append(cmds[n], strings.Join(strings.Fields(cmd), " "))
		}
	}
	inFence, pending, start := false, "", 0
	for i, l := range strings.Split(text, "\n") {
		if docFenceRE.MatchString(l) {
			inFence = !inFence
			continue
		}
		if !inFence {
			for _, span := range docSpanRE.FindAllString(l, -1) {
				// `kubectl logs` alone names the command in prose; a command line has arguments.
				if span = strings.Trim(span, "`"); strings.HasPrefix(span, "kubectl ") && len(strings.Fields(span)) > 2 {
					add(i+1, span)
				}
			}
			continue
		}
		if pending == "" {
			start = i + 1
		}
		if strings.HasSuffix(l, "\\") {
			pending += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		add(start, pending+l)
		pending = ""
	}
	return cmds
}

// The runbooks' (and the other operator pages') kubectl commands run as written: every one that
// names a namespaced object says which namespace. nodeaddr runs in kube-system, and its Events are
// in default, where client-go records Events about Nodes.
func TestDocsKubectlCommandsNameTheirNamespace(t *testing.T) {
	n := 0
	for _, name := range []string{"runbooks.md", "troubleshooting.md", "verify.md", "install.md", "install-helm.md", "monitoring.md", "customize.md", "flow-control.md", "upgrade.md"} {
		for line, cmds := range docKubectlCommands(docRead(t, "docs/"+name)) {
			for _, c := range cmds {
				n++
				if docKubectlNeedsNamespace(strings.Fields(c)) {
					t.Errorf("docs/%s:%d: `kubectl %s` names a namespaced object without -n", name, line, c)
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d kubectl commands found: the parser is broken", n)
	}
}

func TestDocsKubectlNeedsNamespace(t *testing.T) {
	for cmd, want := range map[string]bool{
		"delete $POD": true,
		"get events --field-selector involvedObject.kind=Node,involvedObject.name=$NODE": true,
		"logs $POD --previous":                           true,
		"describe ds nodeaddr":                           true,
		"rollout status ds/nodeaddr":                     true,
		"get servicemonitor,service nodeaddr":            true,
		"exec -it nodeaddr-x -- sh":                      true,
		"-n kube-system delete $POD":                     false,
		"-n default get events":                          false,
		"get events -A":                                  false,
		"--namespace=kube-system logs $POD":              false,
		"get node $NODE -o jsonpath='{.status}'":         false,
		"get csr --field-selector spec.signerName=x":     false,
		"certificate approve csr-1":                      false,
		"apply -k deploy/":                               false,
		"delete -k deploy/":                              false,
		"auth can-i patch nodes/status --as=x":           false,
		"describe node $NODE":                            false,
		"get pods -l app.kubernetes.io/name=nodeaddr -A": false,
	} {
		if got := docKubectlNeedsNamespace(strings.Fields(cmd)); got != want {
			t.Errorf("kubectl %s: needs a namespace = %v, want %v", cmd, got, want)
		}
	}
	got := docKubectlCommands("POD=$(kubectl -n x get pod \\\n  -o name)\n```sh\nkubectl get pods \\\n  -o wide   # comment\n```\n" +
		"Run `kubectl delete $POD` or `kubectl describe`.\n")
	want := map[int][]string{4: {"get pods -o wide"}, 7: {"delete $POD"}} // line 1 is prose: no command
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("docKubectlCommands = %v, want %v", got, want)
	}
}

// docHelpSectionsRE finds the sentence of docs/configuration.md that lists the --help sections.
var docHelpSectionsRE = regexp.MustCompile("`nodeaddr --help` lists them in sections: ([^.]+)\\.")

// docs/configuration.md lists the sections of `nodeaddr --help` as the binary prints them (main
// hands the agent its stdout), in order.
func TestDocsListTheHelpSections(t *testing.T) {
	var out bytes.Buffer
	if code := run(t.Context(), []string{"--help"}, func(string) string { return "" }, &out, io.Discard); code != 0 {
		t.Fatalf("nodeaddr --help: exit %d\n%s", code, out.String())
	}
	var sections []string
	for _, l := range strings.Split(out.String(), "\n") {
		if name, ok := strings.CutSuffix(l, " flags:"); ok && name != "" && !strings.HasPrefix(name, " ") {
			sections = append(sections, name)
		}
	}
	if len(sections) < 5 {
		t.Fatalf("only %d sections in nodeaddr --help:\n%s", len(sections), out.String())
	}
	m := docHelpSectionsRE.FindStringSubmatch(strings.Join(strings.Fields(docRead(t, "docs/configuration.md")), " "))
	if m == nil {
		t.Fatal("docs/configuration.md has no sentence \"`nodeaddr --help` lists them in sections: A, B and C.\"")
	}
	list := strings.Replace(m[1], " and ", ", ", 1)
	if documented := strings.Split(list, ", "); !slices.Equal(documented, sections) {
		t.Errorf("docs/configuration.md lists the --help sections %q, nodeaddr --help prints %q", documented, sections)
	}
}

// ---- the checkers fail on a broken fact ----

// Each checker, given today's facts with one of them broken, reports it: so a docs test that
// passes means the facts agree.
func TestDocsFactsCheckersFail(t *testing.T) {
	page := docRead(t, "docs/configuration.md")
	agent := docFlagsOf(agentcmd.FlagSet(func(string) string { return "" }))
	flags := docSection(page, "Flags")
	for name, broken := range map[string]string{
		"a default":      strings.Replace(flags, "| `--debounce` | `10ms` |", "| `--debounce` | `25ms` |", 1),
		"a missing flag": strings.Replace(flags, "| `--removal-grace` |", "| `--removal-grace-gone` |", 1),
		"a shorthand":    strings.Replace(flags, "| `--output`, `-o` |", "| `--output` |", 1),
	} {
		if broken == flags {
			t.Fatalf("%s: the fixture no longer matches docs/configuration.md", name)
		}
		if len(checkFlagTable(broken, agent)) == 0 {
			t.Errorf("checkFlagTable accepted a table with %s broken", name)
		}
	}
	if len(checkShortFlagsSentence("(only `-h` and `-v=N` have one)", agent)) == 0 {
		t.Error("checkShortFlagsSentence accepted a sentence that leaves out -o")
	}

	rules := docRead(t, "deploy/monitoring/prometheusrule.yaml")
	chart := docRead(t, "deploy/helm/nodeaddr/files/prometheusrule-groups.yaml")
	runbooks := docRead(t, "docs/runbooks.md")
	names := docAlerts(rules)
	added := rules + "\n        - alert: NodeaddrSomethingNew\n"
	if len(checkAlerts(added, chart, runbooks, nil)) == 0 {
		t.Error("checkAlerts accepted an alert without a runbook (and missing from the chart)")
	}
	wrong := docNumberWords[(len(names)+1)%len(docNumberWords)]
	if len(checkAlerts(rules, chart, runbooks, map[string]string{"x.md": "the PrometheusRule with " + wrong + " alerts"})) == 0 {
		t.Errorf("checkAlerts accepted %q for %d alerts", wrong+" alerts", len(names))
	}
	if errs, ok := checkTaintAlertTiming(rules, "fires 10 minutes after the agent started"); ok && len(errs) == 0 {
		t.Error("checkTaintAlertTiming accepted the wrong number of minutes")
	}

	golden := []string{"nodeaddr_a_total", "nodeaddr_b_seconds"}
	if len(checkMetrics("`nodeaddr_a_total`", golden, nil)) == 0 {
		t.Error("checkMetrics accepted a page without nodeaddr_b_seconds")
	}
	if len(checkMetrics("`nodeaddr_a_total`, `nodeaddr_b_seconds_bucket`", golden, []string{"nodeaddr_discovery_x"})) == 0 {
		t.Error("checkMetrics accepted a page without a metric the code defines")
	}
	if len(checkMetrics("`nodeaddr_a_total`, `nodeaddr_b_seconds`, `nodeaddr_gone_total`", golden, nil)) == 0 {
		t.Error("checkMetrics accepted a metric that does not exist")
	}

	values := map[string]any{"image": map[string]any{"repository": "r", "tag": ""}, "monitoring": map[string]any{"labels": map[string]any{}}}
	if errs, _ := checkHelmValues(map[string]string{"x.md": "`image.digest` and `--set image.tag=T`"}, values); len(errs) != 1 {
		t.Errorf("checkHelmValues: %v, want image.digest reported alone", errs)
	}
	if errs, n := checkHelmValues(map[string]string{"x.md": "`image.repository` / `.tag`, `monitoring.labels.team`, `config.yaml`"}, values); len(errs) != 0 || n != 3 {
		t.Errorf("checkHelmValues: %v (%d values), want 3 values found and none reported", errs, n)
	}

	copied := map[string]string{"a.md": "The agents read the allow-list when they start, so restart them after a change.\n",
		"b.md": "Intro.\n\nThe agents read the allow-list when they start, so restart them after a change.\n",
		"c.md": "```sh\nkubectl patch cm nodeaddr -p '{\"data\":{\"metrics-allowed-scrapers\":\"x\"}}'\n```\n"}
	if errs := checkFactsOnce(copied, docOneHome); len(errs) != 2 {
		t.Errorf("checkFactsOnce: %v, want the repeated sentence and the copied snippet", errs)
	}

	part := docRead(t, "docs/bench/results.md")
	if len(checkBenchmarksPart(docRead(t, "docs/BENCHMARKS.md"), part+"| a row the page lacks |\n")) == 0 {
		t.Error("checkBenchmarksPart accepted a results.md row missing from BENCHMARKS.md")
	}

	if len(checkNoIssueNumbers("x.md", "as issue 31 asked (finding 6)")) != 1 {
		t.Error("checkNoIssueNumbers accepted \"issue 31\"")
	}

	files := docFS{"docs": "", "docs/a.md": "# A\n\n## The `--x` flag\n\n```\n## not a heading\n```\n",
		"docs/b.md":          "[ok](a.md#the---x-flag) [bad](a.md#not-a-heading) [gone](c.md) [self](#b) [web](https://example.invalid/c.md)\n\n# B\n",
		"docs/bench/part.md": docFragmentMark + " -->\n[ok](a.md) [bad](bench/a.md)\n"}
	if broken, n := brokenDocLinks(files, "docs/b.md"); len(broken) != 2 || n != 4 {
		t.Errorf("brokenDocLinks: %v of %d links, want the missing anchor and file of 4", broken, n)
	}
	if broken, _ := brokenDocLinks(files, "docs/bench/part.md"); len(broken) != 1 {
		t.Errorf("brokenDocLinks of a part of BENCHMARKS.md: %v, want bench/a.md alone", broken)
	}
	if broken := brokenQuotedRefs(files, "x.yaml", "# see docs/a.md, \"The\n# `--x` flag\" and docs/a.md, \"Gone\" and docs/gone.md"); len(broken) != 2 {
		t.Errorf("brokenQuotedRefs: %v, want the missing heading and file", broken)
	}
}
