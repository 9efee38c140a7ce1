package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// printer is the dry run's sink: one JSON line per change of what would be written to a Node
// without addresses and annotations (publisher.Preview), after the explanation with --explain.
type printer struct {
	w           io.Writer
	annotations []vocab.AnnotationSpec
	explain     bool // --explain
	json        bool // -o json: the explanation as one JSON line

	mu   sync.Mutex
	last *resolver.State
}

type jsonAddress struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// Publish prints s if it changed.
func (d *printer) Publish(s resolver.State, _ time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !resolver.Changed(d.last, s) {
		return
	}
	if d.explain {
		d.writeExplanation(s.Explanation)
	}
	d.last = &s
	addrs, annotations := publisher.Preview(s, d.annotations)
	out := struct {
		Addresses   []jsonAddress     `json:"addresses"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}{Addresses: []jsonAddress{}, Annotations: annotations}
	for _, a := range addrs {
		out.Addresses = append(out.Addresses, jsonAddress{Type: string(a.Type), Address: a.Address})
	}
	b, _ := json.Marshal(out)
	fmt.Fprintf(d.w, "%s\n", b)
}

// Resolved reports whether anything was printed yet.
func (d *printer) Resolved() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last != nil
}

// writeExplanation prints lines as text, one per line, or as one JSON object {"explain":[...]}.
func (d *printer) writeExplanation(lines []resolver.Explained) {
	if d.json {
		b, _ := json.Marshal(struct {
			Explain []resolver.Explained `json:"explain"`
		}{lines})
		fmt.Fprintf(d.w, "%s\n", b)
		return
	}
	for _, l := range lines {
		fmt.Fprintln(d.w, l)
	}
}
