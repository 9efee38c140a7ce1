package app

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// Preview is the dry run's sink: one JSON line per change of what would be written to a Node
// without addresses and annotations (publisher.Preview).
type Preview struct {
	W                         io.Writer
	Annotations               []publisher.AnnotationSpec
	KeepExternalEqualInternal bool

	mu   sync.Mutex
	last *resolver.State
}

type jsonAddress struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// Publish prints s if it changed.
func (d *Preview) Publish(s resolver.State, _ time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !resolver.Changed(d.last, s) {
		return
	}
	d.last = &s
	addrs, annotations := publisher.Preview(s, d.Annotations, d.KeepExternalEqualInternal)
	out := struct {
		Addresses   []jsonAddress     `json:"addresses"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}{Addresses: []jsonAddress{}, Annotations: annotations}
	for _, a := range addrs {
		out.Addresses = append(out.Addresses, jsonAddress{Type: string(a.Type), Address: a.Address})
	}
	b, _ := json.Marshal(out)
	fmt.Fprintf(d.W, "%s\n", b)
}

// Resolved reports whether anything was printed yet.
func (d *Preview) Resolved() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last != nil
}
