package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// printer is the dry run's sink: one JSON line per change of what would be written to a Node
// without addresses and annotations (publisher.Preview).
type printer struct {
	w                         io.Writer
	annotations               []publisher.AnnotationSpec
	keepExternalEqualInternal bool
	explain                   *explainer // --explain; nil prints the JSON lines alone

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
	if d.explain != nil {
		d.explain.write(d.w, d.explain.explain(s, d.last, d.keepExternalEqualInternal))
	}
	d.last = &s
	addrs, annotations := publisher.Preview(s, d.annotations, d.keepExternalEqualInternal)
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
