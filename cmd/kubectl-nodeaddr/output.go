package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// list is the stable structure of -o json and -o yaml: the same object for both, so a script can
// switch between them.
type list[T any] struct {
	Kind  string `json:"kind"`
	Items []T    `json:"items"`
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

// printObject writes v as indented JSON or as YAML.
func printObject(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", format, err)
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
		_, err = w.Write(data)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}
