package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
)

// outputFlags are one command's -o and its flags, as kubectl get has them: cli-runtime's printers,
// and wide and custom-columns(-file), which kubectl get adds itself.
type outputFlags struct {
	flags     *genericclioptions.PrintFlags
	noHeaders *bool
	printer   printers.ResourcePrinter // every format but the default and wide
}

// Formats kubectl get has beside cli-runtime's printers.
const (
	formatWide              = "wide"
	formatCustomColumns     = "custom-columns"
	formatCustomColumnsFile = "custom-columns-file"
)

func addOutputFlags(cmd *cobra.Command, noHeaders *bool) *outputFlags {
	f := &outputFlags{flags: genericclioptions.NewPrintFlags(""), noHeaders: noHeaders}
	f.flags.AddFlags(cmd)
	// The plugin's objects have no managedFields to show.
	_ = cmd.Flags().MarkHidden("show-managed-fields")
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format. One of: (%s). See custom columns "+
		"[https://kubernetes.io/docs/reference/kubectl/#custom-columns], golang template "+
		"[http://golang.org/pkg/text/template/#pkg-overview] and jsonpath template "+
		"[https://kubernetes.io/docs/reference/kubectl/jsonpath/].", strings.Join(f.allowed(), ", "))
	return f
}

func (f *outputFlags) allowed() []string {
	formats := append(f.flags.AllowedFormats(), formatWide, formatCustomColumns, formatCustomColumnsFile)
	slices.Sort(formats)
	return formats
}

func (f *outputFlags) format() string { return *f.flags.OutputFormat }

// table says whether the command prints its own table or text (kubectl get's "human-readable printer").
func (f *outputFlags) table() bool {
	return (f.format() == "" && *f.flags.TemplatePrinterFlags.TemplateArgument == "") || f.format() == formatWide
}

func (f *outputFlags) wide() bool { return f.format() == formatWide }

// complete builds the printer of -o; an unknown format or a bad template is a usage error.
func (f *outputFlags) complete(cmd *cobra.Command) (err error) {
	if !f.table() {
		if f.printer, err = f.toPrinter(); err != nil {
			return usageError{err, cmd}
		}
	}
	return nil
}

func (f *outputFlags) toPrinter() (printers.ResourcePrinter, error) {
	format, arg, _ := strings.Cut(f.format(), "=")
	if format == formatCustomColumns || format == formatCustomColumnsFile {
		if arg == "" {
			arg = *f.flags.TemplatePrinterFlags.TemplateArgument
		}
		if arg == "" {
			return nil, fmt.Errorf("custom-columns format specified but no custom columns given")
		}
		if format == formatCustomColumns {
			return parseCustomColumns(arg, *f.noHeaders)
		}
		file, err := os.Open(arg)
		if err != nil {
			return nil, fmt.Errorf("error reading template %s, %w", arg, err)
		}
		defer file.Close()
		return parseCustomColumnsFile(file, *f.noHeaders)
	}
	p, err := f.flags.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		// Name every format, not only cli-runtime's.
		return nil, genericclioptions.NoCompatiblePrinterError{OutputFormat: f.flags.OutputFormat, AllowedFormats: f.allowed()}
	}
	return p, err
}

// apiObject is a result that is about an API object: what -o name prints.
type apiObject interface {
	APIObject() (schema.GroupVersionKind, string)
}

// printObject writes obj with the printer of -o, or with -o name the API objects of items, each once.
func printObject[T apiObject](f *outputFlags, w io.Writer, obj runtime.Object, items []T) error {
	if _, name := f.printer.(*printers.NamePrinter); !name {
		return f.printer.PrintObj(obj, w)
	}
	l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	type ref struct {
		gvk  schema.GroupVersionKind
		name string
	}
	seen := map[ref]bool{}
	for _, it := range items {
		var r ref
		if r.gvk, r.name = it.APIObject(); seen[r] {
			continue
		}
		seen[r] = true
		var u unstructured.Unstructured
		u.SetGroupVersionKind(r.gvk)
		u.SetName(r.name)
		l.Items = append(l.Items, u)
	}
	return f.printer.PrintObj(l, w)
}

// printList prints items with the printer of -o as the list {"kind": KIND, "items": [...]}: the same
// object for every printer, so that a script can switch between them.
func printList[T apiObject](f *outputFlags, w io.Writer, kind string, items []T) error {
	if items == nil {
		items = []T{}
	}
	return printObject(f, w, &objectList[T]{TypeMeta: metav1.TypeMeta{Kind: kind}, Items: items}, items)
}

type objectList[T any] struct {
	metav1.TypeMeta `json:",inline"`
	Items           []T `json:"items"`
}

func (l *objectList[T]) DeepCopyObject() runtime.Object { return jsonCopy(l) }

// jsonCopy deep-copies through JSON, which is all a printer sees of an object.
func jsonCopy[T any](in *T) *T {
	out := new(T)
	data, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		panic(fmt.Sprintf("deep copy %T: %v", in, err))
	}
	return out
}

// printTable writes rows (header first) in aligned columns, as kubectl does.
func printTable(w io.Writer, table [][]string, noHeaders bool) error {
	if noHeaders && len(table) > 0 {
		table = table[1:]
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, row := range table {
		fmt.Fprintln(tw, strings.TrimRight(strings.Join(row, "\t"), "\t"))
	}
	return tw.Flush()
}

// customColumns is kubectl get's -o custom-columns (k8s.io/kubectl, a module this one does not
// import): a row per item of a list; a cell holds what its JSONPath finds, comma-separated, or <none>.
type customColumns struct {
	headers   []string
	paths     []string // complete JSONPath templates: {.internalIPs[*]}
	parsers   []*jsonpath.JSONPath
	noHeaders bool
}

// parseCustomColumns reads HEADER:PATH[,HEADER:PATH…].
func parseCustomColumns(spec string, noHeaders bool) (*customColumns, error) {
	c := &customColumns{noHeaders: noHeaders}
	for part := range strings.SplitSeq(spec, ",") {
		header, path, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("unexpected custom-columns spec: %s, expected <header>:<json-path-expr>", part)
		}
		if err := c.add(header, path); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// parseCustomColumnsFile reads a line of headers, then a line of paths.
func parseCustomColumnsFile(r io.Reader, noHeaders bool) (*customColumns, error) {
	sc := bufio.NewScanner(r)
	var lines [2][]string
	for i, what := range []string{"header", "spec"} {
		if !sc.Scan() {
			return nil, fmt.Errorf("invalid template, missing %s line. Expected format is one line of space separated headers, one line of space separated column specs", what)
		}
		lines[i] = strings.Fields(sc.Text())
	}
	if len(lines[0]) != len(lines[1]) {
		return nil, fmt.Errorf("number of headers (%d) and field specifications (%d) don't match", len(lines[0]), len(lines[1]))
	}
	c := &customColumns{noHeaders: noHeaders}
	for i := range lines[0] {
		if err := c.add(lines[0][i], lines[1][i]); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// relaxedPath accepts name.sub, .name.sub, {name.sub} or {.name.sub}, as kubectl does.
var relaxedPath = regexp.MustCompile(`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`)

func (c *customColumns) add(header, path string) error {
	m := relaxedPath.FindStringSubmatch(path)
	if m == nil {
		return fmt.Errorf("unexpected path string %q, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or '{.name1.name2}'", path)
	}
	tmpl := "{." + m[1] + m[2] + "}"
	p := jsonpath.New(header).AllowMissingKeys(true)
	if err := p.Parse(tmpl); err != nil {
		return fmt.Errorf("custom column %s: %w", header, err)
	}
	c.headers, c.paths, c.parsers = append(c.headers, header), append(c.paths, tmpl), append(c.parsers, p)
	return nil
}

func (c *customColumns) PrintObj(obj runtime.Object, w io.Writer) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var content map[string]any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber() // 10250, not 10250.0 or 1.025e+04
	if err := d.Decode(&content); err != nil {
		return err
	}
	rows := []any{content}
	if items, ok := content["items"].([]any); ok && meta.IsListType(obj) {
		rows = items
	}
	table := [][]string{c.headers}
	for _, row := range rows {
		line := make([]string, len(c.parsers))
		for i, p := range c.parsers {
			results, err := p.FindResults(row)
			if err != nil {
				return err
			}
			var values []string
			for _, r := range results {
				for _, v := range r {
					s := "<none>" // a missing key yields an invalid value
					if v.IsValid() {
						s = printers.EscapeTerminal(fmt.Sprint(v.Interface()))
					}
					values = append(values, s)
				}
			}
			if len(values) == 0 {
				values = []string{"<none>"}
			}
			line[i] = strings.Join(values, ",")
		}
		table = append(table, line)
	}
	return printTable(w, table, c.noHeaders)
}
