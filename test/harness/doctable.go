package harness

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// DocTable is a generated Markdown table in a document of the repository, between two marker
// lines: the version matrix's and the real node's compatibility tables in docs/install.md.
type DocTable struct {
	File       string // path of the document
	Begin, End string // the marker lines around the table
}

// Split returns the document around the table and the table itself.
func (d DocTable) Split() (before, table, after string, err error) {
	doc, err := os.ReadFile(d.File)
	if err != nil {
		return "", "", "", err
	}
	before, rest, ok := strings.Cut(string(doc), d.Begin+"\n")
	table, after, ok2 := strings.Cut(rest, d.End)
	if !ok || !ok2 {
		return "", "", "", fmt.Errorf("%s lacks the table markers %q and %q", d.File, d.Begin, d.End)
	}
	return before, table, after, nil
}

// Write replaces the table in the document.
func (d DocTable) Write(table string) error {
	before, _, after, err := d.Split()
	if err != nil {
		return err
	}
	return os.WriteFile(d.File, []byte(before+d.Begin+"\n"+table+d.End+after), 0o644)
}

var tableVersion = regexp.MustCompile(`(?m)^\| [0-9.]+ \| (v[0-9.]+) \|`)

// TableVersions returns the release of each row of a table whose first two columns are the
// minor version and the full version ("| 1.37 | v1.37.2 |").
func TableVersions(table string) []string {
	var versions []string
	for _, m := range tableVersion.FindAllStringSubmatch(table, -1) {
		versions = append(versions, m[1])
	}
	return versions
}

// MinorRelease is a version's minor release as the tables show it: "v1.37.2" -> "1.37".
func MinorRelease(version string) string {
	return strings.Join(strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)[:2], ".")
}
