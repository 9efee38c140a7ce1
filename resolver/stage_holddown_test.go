package resolver

import (
	"slices"
	"testing"
	"time"
)

type holdStep struct {
	at       int // ms after t0
	managed  []AddressType
	resolved []Address // the fresh resolution
	want     []Address // the effective state
	wantNext int       // ms after t0 of the next expiry; -1: none
}

func TestHoldDown(t *testing.T) {
	ext := []AddressType{ExternalIP}
	both := []AddressType{InternalIP, ExternalIP}
	a4, b4 := addr(ExternalIP, "192.0.2.10"), addr(ExternalIP, "192.0.2.20")
	a6 := addr(ExternalIP, "2001:db8::10")
	i4 := addr(InternalIP, "10.0.0.10")
	tests := []struct {
		name  string
		grace time.Duration
		steps []holdStep
	}{
		{
			name: "replacement takes effect at once", grace: 5 * time.Second,
			steps: []holdStep{
				{at: 0, managed: ext, resolved: []Address{a4}, want: []Address{a4}, wantNext: -1},
				{at: 100, managed: ext, resolved: []Address{b4}, want: []Address{b4}, wantNext: -1},
				// The replaced address is not held either once the replacement goes.
				{at: 200, managed: ext, resolved: nil, want: []Address{b4}, wantNext: 5200},
			},
		},
		{
			name: "removal held for the grace, then dropped", grace: 5 * time.Second,
			steps: []holdStep{
				{at: 0, managed: ext, resolved: []Address{a4, a6}, want: []Address{a4, a6}, wantNext: -1},
				{at: 1000, managed: ext, resolved: []Address{a6}, want: []Address{a4, a6}, wantNext: 6000},
				{at: 3000, managed: ext, resolved: []Address{a6}, want: []Address{a4, a6}, wantNext: 6000},
				{at: 5999, managed: ext, resolved: []Address{a6}, want: []Address{a4, a6}, wantNext: 6000},
				{at: 6000, managed: ext, resolved: []Address{a6}, want: []Address{a6}, wantNext: -1},
				{at: 7000, managed: ext, resolved: []Address{a6}, want: []Address{a6}, wantNext: -1},
			},
		},
		{
			// The grace runs from the first resolution that misses the address, however long ago
			// the last one that saw it was (a quiet node resolves only every resync interval).
			name: "grace counts from the first miss", grace: 5 * time.Second,
			steps: []holdStep{
				{at: 0, managed: ext, resolved: []Address{a4}, want: []Address{a4}, wantNext: -1},
				{at: 60000, managed: ext, resolved: nil, want: []Address{a4}, wantNext: 65000},
				{at: 61000, managed: ext, resolved: []Address{a4}, want: []Address{a4}, wantNext: -1},
				{at: 120000, managed: ext, resolved: nil, want: []Address{a4}, wantNext: 125000},
				{at: 125000, managed: ext, resolved: nil, want: nil, wantNext: -1},
			},
		},
		{
			name: "comes back within the grace", grace: 5 * time.Second,
			steps: []holdStep{
				{at: 0, managed: ext, resolved: []Address{a4}, want: []Address{a4}, wantNext: -1},
				{at: 100, managed: ext, resolved: nil, want: []Address{a4}, wantNext: 5100},
				{at: 2000, managed: ext, resolved: []Address{a4}, want: []Address{a4}, wantNext: -1},
				// A second disappearance gets a whole new grace.
				{at: 4000, managed: ext, resolved: nil, want: []Address{a4}, wantNext: 9000},
				{at: 8000, managed: ext, resolved: nil, want: []Address{a4}, wantNext: 9000},
			},
		},
		{
			name: "next expiry is the earliest", grace: 5 * time.Second,
			steps: []holdStep{
				{at: 0, managed: both, resolved: []Address{i4, a4, a6}, want: []Address{i4, a4, a6}, wantNext: -1},
				{at: 1000, managed: both, resolved: []Address{i4, a4}, want: []Address{i4, a4, a6}, wantNext: 6000},
				{at: 2000, managed: both, resolved: []Address{a4}, want: []Address{i4, a4, a6}, wantNext: 6000},
				{at: 6000, managed: both, resolved: []Address{a4}, want: []Address{i4, a4}, wantNext: 7000},
				{at: 7000, managed: both, resolved: []Address{a4}, want: []Address{a4}, wantNext: -1},
			},
		},
		{
			name: "type no longer managed is dropped at once", grace: 5 * time.Second,
			steps: []holdStep{
				{at: 0, managed: both, resolved: []Address{i4, a4}, want: []Address{i4, a4}, wantNext: -1},
				{at: 100, managed: ext, resolved: []Address{a4}, want: []Address{a4}, wantNext: -1},
				// Managed again: it was forgotten, nothing comes back.
				{at: 200, managed: both, resolved: []Address{a4}, want: []Address{a4}, wantNext: -1},
			},
		},
		{
			name: "zero grace drops at once", grace: 0,
			steps: []holdStep{
				{at: 0, managed: ext, resolved: []Address{a4}, want: []Address{a4}, wantNext: -1},
				{at: 100, managed: ext, resolved: nil, want: nil, wantNext: -1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := holdDown{Grace: tt.grace}
			for i, s := range tt.steps {
				got, next := h.Apply(at(s.at), State{Managed: s.managed, Addresses: s.resolved})
				if !slices.Equal(got.Managed, s.managed) {
					t.Errorf("step %d (t0+%dms): Managed = %v, want %v", i, s.at, got.Managed, s.managed)
				}
				if !slices.Equal(got.Addresses, s.want) {
					t.Errorf("step %d (t0+%dms): Addresses = %v, want %v", i, s.at, got.Addresses, s.want)
				}
				var wantNext time.Time
				if s.wantNext >= 0 {
					wantNext = at(s.wantNext)
				}
				if !next.Equal(wantNext) {
					t.Errorf("step %d (t0+%dms): next expiry = %v, want %v", i, s.at, next, wantNext)
				}
			}
		})
	}
}
