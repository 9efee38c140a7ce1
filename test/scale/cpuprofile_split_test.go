//go:build bench

package scale

import (
	"context"
	"runtime/pprof"
	"testing"
	"time"
)

// The profile's split counts the CPU of goroutines labelled component=approver apart from the rest.
func TestCPUProfileSplit(t *testing.T) {
	p := startCPUProfile()
	burn := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
	}
	pprof.Do(context.Background(), pprof.Labels("component", approverLabel), func(context.Context) { burn(300 * time.Millisecond) })
	burn(300 * time.Millisecond)
	s := p.stop()
	if s.err != nil {
		t.Fatal(s.err)
	}
	if s.approver <= 0 || s.total <= s.approver {
		t.Errorf("split: total %v, approver %v; want both, the total larger", s.total, s.approver)
	}
}
