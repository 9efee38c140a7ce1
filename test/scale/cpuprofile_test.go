//go:build bench

package scale

import (
	"bytes"
	"errors"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/google/pprof/profile"
)

// cpuProfile samples this process's CPU (runtime/pprof, 100 Hz) to split it by goroutine label:
// the approver shares the process with the fleet, and its goroutines carry component=approver.
// The runtime's background work (the garbage collector's workers) carries no label: it counts in
// the total only.
type cpuProfile struct {
	buf bytes.Buffer
	err error // the profile could not start (another one runs: go test -cpuprofile)
}

func startCPUProfile() *cpuProfile {
	p := &cpuProfile{}
	p.err = pprof.StartCPUProfile(&p.buf)
	return p
}

// cpuSplit is a profile's CPU time, in total and in goroutines labelled component=approver.
type cpuSplit struct {
	total, approver time.Duration
	err             error
}

func (p *cpuProfile) stop() cpuSplit {
	if p.err != nil {
		return cpuSplit{err: p.err}
	}
	pprof.StopCPUProfile()
	total, labelled, err := labelledCPU(p.buf.Bytes(), "component", approverLabel)
	return cpuSplit{total: total, approver: labelled, err: err}
}

// labelledCPU reads a gzipped CPU profile (profile.proto) and sums its CPU time, in total and in
// the samples labelled key=value.
func labelledCPU(gz []byte, key, value string) (total, labelled time.Duration, err error) {
	p, err := profile.Parse(bytes.NewReader(gz))
	if err != nil {
		return 0, 0, err
	}
	cpu := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
	if cpu < 0 {
		return 0, 0, errors.New("CPU profile without a cpu sample type")
	}
	for _, s := range p.Sample {
		if cpu >= len(s.Value) {
			continue
		}
		d := time.Duration(s.Value[cpu])
		total += d
		if slices.Contains(s.Label[key], value) {
			labelled += d
		}
	}
	return total, labelled, nil
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
