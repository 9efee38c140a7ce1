package resolver

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestDebouncer(t *testing.T) {
	tests := []struct {
		name     string
		quiet    time.Duration
		maxDelay time.Duration
		events   []int // ms after t0
		wantDue  int   // ms after t0; -1: nothing pending
	}{
		{name: "nothing pending", quiet: 100 * time.Millisecond, maxDelay: time.Second, events: nil, wantDue: -1},
		{name: "single event", quiet: 100 * time.Millisecond, maxDelay: time.Second, events: []int{0}, wantDue: 100},
		{name: "quiet after the last event", quiet: 100 * time.Millisecond, maxDelay: time.Second, events: []int{0, 30, 60}, wantDue: 160},
		{name: "continuous churn capped by max delay", quiet: 100 * time.Millisecond, maxDelay: time.Second,
			events: []int{0, 50, 100, 150, 200, 250, 300, 350, 400, 450, 500, 550, 600, 650, 700, 750, 800, 850, 900, 950}, wantDue: 1000},
		{name: "cap counts from the first event", quiet: 100 * time.Millisecond, maxDelay: 250 * time.Millisecond,
			events: []int{10, 90, 170, 250}, wantDue: 260},
		{name: "no max delay", quiet: 100 * time.Millisecond, maxDelay: 0, events: []int{0, 50, 5000}, wantDue: 5100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := debouncer{Quiet: tt.quiet, MaxDelay: tt.maxDelay}
			for _, ms := range tt.events {
				d.Event(at(ms), false)
			}
			due, ok := d.Due()
			if tt.wantDue < 0 {
				if ok {
					t.Fatalf("Due() = %v, true; want nothing pending", due)
				}
				return
			}
			if !ok || !due.Equal(at(tt.wantDue)) {
				t.Fatalf("Due() = %v, %v; want t0+%dms", due.Sub(t0), ok, tt.wantDue)
			}
		})
	}
}

func TestDebouncerReset(t *testing.T) {
	d := debouncer{Quiet: 100 * time.Millisecond, MaxDelay: time.Second}
	d.Event(at(0), false)
	d.Event(at(900), false)
	d.Reset()
	if due, ok := d.Due(); ok {
		t.Fatalf("after Reset: Due() = %v, true; want nothing pending", due)
	}
	// A new burst starts its own max-delay window.
	d.Event(at(1500), false)
	if due, ok := d.Due(); !ok || !due.Equal(at(1600)) {
		t.Fatalf("new burst: Due() = %v, %v; want t0+1600ms", due.Sub(t0), ok)
	}
}

// holdStep is one resolution fed to a HoldDown in TestHoldDown.
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

// A link event holds the burst for LinkQuiet after it; address, route and rule events need only
// Quiet; the cap still counts from the burst's first event. Wait names what the burst waits for.
func TestDebouncerLinkHold(t *testing.T) {
	type ev struct {
		ms   int
		link bool
	}
	for _, tc := range []struct {
		name    string
		events  []ev
		wantDue int
		wantWhy string
	}{
		{"address events only", []ev{{0, false}, {4, false}}, 14, "quiet 10ms after the last address, route or rule event"},
		{"one link event", []ev{{0, true}}, 100, "link hold 100ms after the last link event"},
		{"address events after a link event", []ev{{0, true}, {50, false}}, 100, "link hold 100ms after the last link event"},
		{"address events outlast the link hold", []ev{{0, true}, {95, false}}, 105, "quiet 10ms after the last address, route or rule event"},
		{"a carrier flapping every 30ms", []ev{{0, true}, {30, true}, {60, true}, {90, true}}, 190, "link hold 100ms after the last link event"},
		{"a carrier flapping for longer than the cap", []ev{{0, true}, {60, true}, {120, true}, {180, true}, {240, true}}, 300, "max delay 300ms after the burst's first event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := debouncer{Quiet: 10 * time.Millisecond, LinkQuiet: 100 * time.Millisecond, MaxDelay: 300 * time.Millisecond}
			for _, e := range tc.events {
				d.Event(at(e.ms), e.link)
			}
			due, ok := d.Due()
			if !ok || !due.Equal(at(tc.wantDue)) || d.Wait() != tc.wantWhy {
				t.Fatalf("Due() = t0+%v, %v, Wait() = %q; want t0+%dms, %q", due.Sub(t0), ok, d.Wait(), tc.wantDue, tc.wantWhy)
			}
			d.Reset()
			d.Event(at(1000), false)
			if due, _ := d.Due(); !due.Equal(at(1010)) {
				t.Fatalf("after Reset, a link event is forgotten: Due() = t0+%v", due.Sub(t0))
			}
		})
	}
}
