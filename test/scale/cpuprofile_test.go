//go:build bench

package scale

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
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
// the samples labelled key=value. A few fields of the format are all it needs:
//
//	Profile: 1 sample_type (ValueType), 2 sample (Sample), 6 string_table (string)
//	Sample: 2 value (int64, packed or not), 3 label (Label)
//	Label: 1 key, 2 str (string table indexes)
//	ValueType: 1 type (string table index)
func labelledCPU(gz []byte, key, value string) (total, labelled time.Duration, err error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return 0, 0, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return 0, 0, err
	}
	type sample struct {
		values []int64
		labels [][2]int64 // key, str
	}
	var (
		strs    []string
		types   []int64 // sample_type[i].type
		samples []sample
	)
	err = eachField(raw, func(num protowire.Number, typ protowire.Type, b []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			var t int64
			err := eachField(b, func(num protowire.Number, typ protowire.Type, _ []byte, v uint64) error {
				if num == 1 && typ == protowire.VarintType {
					t = int64(v)
				}
				return nil
			})
			types = append(types, t)
			return err
		case 2:
			var s sample
			err := eachField(b, func(num protowire.Number, typ protowire.Type, b []byte, v uint64) error {
				switch {
				case num == 2 && typ == protowire.VarintType:
					s.values = append(s.values, int64(v))
				case num == 2 && typ == protowire.BytesType:
					for len(b) > 0 {
						x, n := protowire.ConsumeVarint(b)
						if n < 0 {
							return protowire.ParseError(n)
						}
						s.values = append(s.values, int64(x))
						b = b[n:]
					}
				case num == 3 && typ == protowire.BytesType:
					var l [2]int64
					err := eachField(b, func(num protowire.Number, typ protowire.Type, _ []byte, v uint64) error {
						if typ == protowire.VarintType && (num == 1 || num == 2) {
							l[num-1] = int64(v)
						}
						return nil
					})
					if err != nil {
						return err
					}
					s.labels = append(s.labels, l)
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 6:
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	str := func(i int64) string {
		if i < 0 || int(i) >= len(strs) {
			return ""
		}
		return strs[i]
	}
	cpu := -1
	for i, t := range types {
		if str(t) == "cpu" {
			cpu = i
		}
	}
	if cpu < 0 {
		return 0, 0, errors.New("CPU profile without a cpu sample type")
	}
	for _, s := range samples {
		if cpu >= len(s.values) {
			continue
		}
		d := time.Duration(s.values[cpu])
		total += d
		for _, l := range s.labels {
			if str(l[0]) == key && str(l[1]) == value {
				labelled += d
				break
			}
		}
	}
	return total, labelled, nil
}

// eachField calls f for each field of the protobuf message b: its bytes for a length-delimited
// field, its value for a varint.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, bytes []byte, varint uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("profile: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var (
			bs []byte
			v  uint64
		)
		switch typ {
		case protowire.BytesType:
			bs, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("profile: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, typ, bs, v); err != nil {
			return err
		}
	}
	return nil
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
