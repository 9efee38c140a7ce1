package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
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

// outputFlags are one command's -o and the flags that go with it, as kubectl get has them:
// cli-runtime's printers (json, yaml, kyaml, name, jsonpath, jsonpath-as-json, jsonpath-file,
// go-template, go-template-file, template, templatefile; --template, --allow-missing-template-keys)
// and the two kubectl get adds itself, wide and custom-columns (custom-columns-file). The default
// and wide output are the command's own table.
type outputFlags struct {
	flags     *genericclioptions.PrintFlags
	noHeaders *bool
	// printer prints every format but the default and wide; complete sets it.
	printer printers.ResourcePrinter
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

// allowed lists every -o format, sorted.
func (f *outputFlags) allowed() []string {
	formats := append(f.flags.AllowedFormats(), formatWide, formatCustomColumns, formatCustomColumnsFile)
	slices.Sort(formats)
	return formats
}

func (f *outputFlags) format() string { return *f.flags.OutputFormat }

// table says whether the command prints its own table (or text): no -o (and no --template), or
// -o wide. This is kubectl get's "human-readable printer".
func (f *outputFlags) table() bool {
	return (f.format() == "" && *f.flags.TemplatePrinterFlags.TemplateArgument == "") || f.format() == formatWide
}

// wide says whether -o wide was asked for.
func (f *outputFlags) wide() bool { return f.format() == formatWide }

// complete builds the printer of -o. A format it does not know, a missing template or one that does
// not parse is a usage error.
func (f *outputFlags) complete(cmd *cobra.Command) error {
	if f.table() {
		return nil
	}
	p, err := f.toPrinter()
	if err != nil {
		return usageError{err, cmd}
	}
	f.printer = p
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

// print writes a command's result with the printer of -o: obj, or with -o name the API objects
// the result is about (refs), as kubectl names them (pod/NAME, node/NAME,
// endpointslice.discovery.k8s.io/NAME, …), each once.
func (f *outputFlags) print(w io.Writer, obj runtime.Object, refs []objectRef) error {
	if _, name := f.printer.(*printers.NamePrinter); name {
		return f.printer.PrintObj(nameList(refs), w)
	}
	return f.printer.PrintObj(obj, w)
}

// objectList is the stable structure a list command prints with -o json, yaml, jsonpath, templates
// and custom columns: {"kind": KIND, "items": [...]}, the same object for every printer, so that a
// script can switch between them.
type objectList[T any] struct {
	metav1.TypeMeta `json:",inline"`
	Items           []T `json:"items"`
}

func newList[T any](kind string, items []T) *objectList[T] {
	if items == nil {
		items = []T{}
	}
	return &objectList[T]{TypeMeta: metav1.TypeMeta{Kind: kind}, Items: items}
}

// DeepCopyObject copies through JSON, which is all a printer sees of the list.
func (l *objectList[T]) DeepCopyObject() runtime.Object {
	out := &objectList[T]{}
	deepCopyJSON(l, out)
	return out
}

func deepCopyJSON(in, out any) {
	data, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		panic(fmt.Sprintf("deep copy %T: %v", in, err))
	}
}

// objectRef is an API object a result is about, for -o name.
type objectRef struct {
	gvk  schema.GroupVersionKind
	name string
}

var nodeKind = schema.GroupVersionKind{Version: "v1", Kind: "Node"}

// nameList is the list cli-runtime's name printer prints, each object once, in order.
func nameList(refs []objectRef) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	seen := map[objectRef]bool{}
	for _, r := range refs {
		if seen[r] {
			continue
		}
		seen[r] = true
		var u unstructured.Unstructured
		u.SetGroupVersionKind(r.gvk)
		u.SetName(r.name)
		l.Items = append(l.Items, u)
	}
	return l
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

// customColumns is kubectl get's -o custom-columns (k8s.io/kubectl's get.CustomColumnsPrinter, in
// a module this one does not import): a table with one row per item of a list, else one for the
// object; each cell holds the values a JSONPath finds, comma-separated, or <none>.
type customColumns struct {
	headers   []string
	paths     []string // complete JSONPath templates: {.internalIPs[*]}
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

// parseCustomColumnsFile reads kubectl's custom-columns file: a line of headers, then a line of
// paths, both separated by white space.
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

// relaxedPath accepts a JSONPath as kubectl's custom columns do: name.sub, .name.sub, {name.sub}
// or {.name.sub}.
var relaxedPath = regexp.MustCompile(`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`)

func (c *customColumns) add(header, path string) error {
	m := relaxedPath.FindStringSubmatch(path)
	if m == nil {
		return fmt.Errorf("unexpected path string %q, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or '{.name1.name2}'", path)
	}
	tmpl := "{." + m[1] + m[2] + "}"
	if err := jsonpath.New(header).AllowMissingKeys(true).Parse(tmpl); err != nil {
		return fmt.Errorf("custom column %s: %w", header, err)
	}
	c.headers, c.paths = append(c.headers, header), append(c.paths, tmpl)
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
		line := make([]string, len(c.paths))
		for i, tmpl := range c.paths {
			p := jsonpath.New(c.headers[i]).AllowMissingKeys(true)
			if err := p.Parse(tmpl); err != nil {
				return err
			}
			results, err := p.FindResults(row)
			if err != nil {
				return err
			}
			var values []string
			for _, r := range results {
				for _, v := range r {
					values = append(values, printers.EscapeTerminal(fmt.Sprint(cellValue(v))))
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

// cellValue is what a JSONPath result holds; a missing key yields an invalid value.
func cellValue(v reflect.Value) any {
	if !v.IsValid() {
		return "<none>"
	}
	return v.Interface()
}
