// Command chartdoc writes deploy/helm/nodeaddr/README.md from the chart: Chart.yaml, and a table of
// every value of values.yaml with its default and the comment above it (else the description in
// values.schema.json). `make generate` runs it; test/deploy fails when the README is stale.
//
//	go run ./chartdoc -repo ../..          # from test/tools/
//	go run ./chartdoc -repo ../.. -check   # exit 1 when the README differs
//
// Values are listed down to their leaves, except the Kubernetes objects the chart passes through
// as they are (those the schema leaves open), which are one row each.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

var keyRE = regexp.MustCompile(`^(\s*)([A-Za-z0-9_.]+):(?:\s|$)`)

// comments maps each key path of values.yaml (a.b.c) to the comment block right above it. A
// "# -- Heading" line inside a block is a section heading of the rows that follow.
func comments(values []byte) (desc map[string]string, headings map[string]string) {
	desc, headings = map[string]string{}, map[string]string{}
	type level struct {
		indent int
		key    string
	}
	var stack []level
	var block []string
	sc := bufio.NewScanner(bytes.NewReader(values))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			block = nil
			continue
		case strings.HasPrefix(trimmed, "#"):
			block = append(block, strings.TrimSpace(strings.TrimPrefix(trimmed, "#")))
			continue
		}
		m := keyRE.FindStringSubmatch(line)
		if m == nil { // a list item or a continuation
			block = nil
			continue
		}
		indent := len(m[1])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, level{indent, m[2]})
		var path []string
		for _, l := range stack {
			path = append(path, l.key)
		}
		key := strings.Join(path, ".")
		var text []string
		for _, c := range block {
			if h, ok := strings.CutPrefix(c, "-- "); ok {
				headings[key] = h
				continue
			}
			text = append(text, c)
		}
		desc[key] = strings.Join(text, " ")
		block = nil
	}
	return desc, headings
}

type row struct{ key, def, desc, heading string }

// rows walks the values in file order (given by keys) and the schema.
func rows(values map[string]any, order []string, schema map[string]any, desc, headings map[string]string) []row {
	var out []row
	seen := map[string]bool{}
	for _, key := range order {
		v, node, ok := lookup(values, schema, key)
		if !ok || seen[key] {
			continue
		}
		// Inside a leaf already listed (a pass-through object)?
		covered := false
		for k := range seen {
			if strings.HasPrefix(key, k+".") {
				covered = true
			}
		}
		if covered {
			continue
		}
		_, open := node["properties"]
		if m, isMap := v.(map[string]any); isMap && open && len(m) > 0 {
			if h := headings[key]; h != "" {
				out = append(out, row{heading: h})
			}
			if d := desc[key]; d != "" {
				out = append(out, row{key: key, desc: d}) // what the group is for; its children follow
			}
			continue
		}
		seen[key] = true
		d := desc[key]
		if d == "" {
			d, _ = node["description"].(string)
		}
		if h := headings[key]; h != "" {
			out = append(out, row{heading: h})
		}
		out = append(out, row{key: key, def: render(v), desc: d})
	}
	return out
}

func lookup(values map[string]any, schema map[string]any, key string) (any, map[string]any, bool) {
	var v any = values
	node := schema
	for _, part := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nil, false
		}
		if v, ok = m[part]; !ok {
			return nil, nil, false
		}
		props, _ := node["properties"].(map[string]any)
		next, _ := props[part].(map[string]any)
		if next == nil {
			next = map[string]any{}
		}
		node = next
	}
	return v, node, true
}

func render(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return "`" + strings.ReplaceAll(string(b), "|", `\|`) + "`"
}

func generate(repo string) ([]byte, error) {
	chartDir := filepath.Join(repo, "deploy", "helm", "nodeaddr")
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(chartDir, name)) }
	chartYAML, err := read("Chart.yaml")
	if err != nil {
		return nil, err
	}
	var chart struct {
		Name, Version, AppVersion, Description, KubeVersion string
	}
	if err := yaml.Unmarshal(chartYAML, &chart); err != nil {
		return nil, err
	}
	valuesYAML, err := read("values.yaml")
	if err != nil {
		return nil, err
	}
	var values map[string]any
	if err := yaml.Unmarshal(valuesYAML, &values); err != nil {
		return nil, err
	}
	schemaJSON, err := read("values.schema.json")
	if err != nil {
		return nil, err
	}
	var schema map[string]any
	if err := json.Unmarshal(schemaJSON, &schema); err != nil {
		return nil, err
	}
	desc, headings := comments(valuesYAML)
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(valuesYAML))
	var stack []struct {
		indent int
		key    string
	}
	for sc.Scan() {
		m := keyRE.FindStringSubmatch(sc.Text())
		if m == nil || strings.HasPrefix(strings.TrimSpace(sc.Text()), "#") {
			continue
		}
		indent := len(m[1])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, struct {
			indent int
			key    string
		}{indent, m[2]})
		var path []string
		for _, l := range stack {
			path = append(path, l.key)
		}
		order = append(order, strings.Join(path, "."))
	}

	var b bytes.Buffer
	fmt.Fprintf(&b, "<!-- Generated by test/tools/chartdoc (make generate) from Chart.yaml, values.yaml and values.schema.json: edit those. -->\n")
	fmt.Fprintf(&b, "# %s\n\n%s\n\n", chart.Name, strings.TrimSpace(chart.Description))
	docs := docsBase(chart.Version)
	if isRelease(chart.Version) {
		fmt.Fprintf(&b, "Chart version `%s`, image `ghcr.io/nodeaddr/nodeaddr:%s`, Kubernetes `%s`.\n\n", chart.Version, chart.AppVersion, chart.KubeVersion)
		fmt.Fprintf(&b, "```sh\nhelm install nodeaddr oci://ghcr.io/nodeaddr/charts/nodeaddr --version %s -n kube-system\n```\n\n", chart.Version)
	} else {
		fmt.Fprintf(&b, "Chart version `%s`: the development chart of `main`, not released; no image `ghcr.io/nodeaddr/nodeaddr:%s` "+
			"is published. Kubernetes `%s`. From a checkout, with an image you built:\n\n", chart.Version, chart.AppVersion, chart.KubeVersion)
		b.WriteString("```sh\nhelm install nodeaddr deploy/helm/nodeaddr -n kube-system --set image.repository=REGISTRY/nodeaddr --set image.tag=TAG\n```\n\n")
	}
	fmt.Fprintf(&b, "Install it into `kube-system`; the guide is [docs/install-helm.md](%sinstall-helm.md). "+
		"`values.schema.json` refuses unknown values.\n", docs)
	all := rows(values, order, schema, desc, headings)
	for i := range all {
		all[i].desc, all[i].heading = linkDocs(all[i].desc, docs), linkDocs(all[i].heading, docs)
	}
	table := func(title string, keep func(row) bool) {
		fmt.Fprintf(&b, "\n## %s\n\n| value | default | description |\n| --- | --- | --- |\n", title)
		for i, r := range all {
			if r.heading != "" {
				// A heading belongs to the table of the row it precedes.
				if i+1 < len(all) && keep(all[i+1]) {
					fmt.Fprintf(&b, "| **%s** | | |\n", r.heading)
				}
				continue
			}
			if keep(r) {
				fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.key, r.def, strings.ReplaceAll(r.desc, "|", `\|`))
			}
		}
	}
	isFlag := func(r row) bool { return r.key == "config" || strings.HasPrefix(r.key, "config.") }
	table("The agent's flags (`config`)", isFlag)
	table("Other values", func(r row) bool { return !isFlag(r) })
	return b.Bytes(), nil
}

// The chart's README is also the README of the packaged chart (Artifact Hub, `helm show readme`),
// read without the repository around it: its links are absolute, to the docs of the chart's own
// version (the tag vVERSION), or of main for a development version.
const repoURL = "https://github.com/nodeaddr/nodeaddr"

// prereleaseRE matches a semantic version with a pre-release part (0.2.0-dev): not a release.
var prereleaseRE = regexp.MustCompile(`^\d+\.\d+\.\d+-`)

func isRelease(version string) bool { return !prereleaseRE.MatchString(version) }

// docsBase is the URL of docs/ for the chart's version.
func docsBase(version string) string {
	ref := "v" + version
	if !isRelease(version) {
		ref = "main"
	}
	return repoURL + "/blob/" + ref + "/docs/"
}

var docRE = regexp.MustCompile(`\bdocs/([A-Za-z0-9_-]+\.md)`)

// linkDocs turns the docs/NAME.md a value's comment mentions into a link.
func linkDocs(desc, docs string) string {
	return docRE.ReplaceAllString(desc, "[docs/$1]("+docs+"$1)")
}

func main() {
	repo := flag.String("repo", "..", "the repository's root directory")
	check := flag.Bool("check", false, "write nothing; exit 1 when the README differs")
	flag.Parse()
	out, err := generate(*repo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartdoc:", err)
		os.Exit(1)
	}
	path := filepath.Join(*repo, "deploy", "helm", "nodeaddr", "README.md")
	if *check {
		if cur, err := os.ReadFile(path); err != nil || !bytes.Equal(cur, out) {
			fmt.Fprintln(os.Stderr, "deploy/helm/nodeaddr/README.md is stale: run make generate")
			os.Exit(1)
		}
		return
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "chartdoc:", err)
		os.Exit(1)
	}
}
