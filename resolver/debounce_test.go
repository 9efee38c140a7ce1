package resolver

import (
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
			due, _, ok := d.Due()
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
	if due, _, ok := d.Due(); ok {
		t.Fatalf("after Reset: Due() = %v, true; want nothing pending", due)
	}
	// A new burst starts its own max-delay window.
	d.Event(at(1500), false)
	if due, _, ok := d.Due(); !ok || !due.Equal(at(1600)) {
		t.Fatalf("new burst: Due() = %v, %v; want t0+1600ms", due.Sub(t0), ok)
	}
}

// holdStep is one resolution fed to a HoldDown in TestHoldDown.
// A link event holds the burst for LinkQuiet after it; address, route and rule events need only
// Quiet; the cap still counts from the burst's first event. Due names what the burst waits for.
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
			due, why, ok := d.Due()
			if !ok || !due.Equal(at(tc.wantDue)) || why != tc.wantWhy {
				t.Fatalf("Due() = t0+%v, %q, %v; want t0+%dms, %q", due.Sub(t0), why, ok, tc.wantDue, tc.wantWhy)
			}
			d.Reset()
			d.Event(at(1000), false)
			if due, _, _ := d.Due(); !due.Equal(at(1010)) {
				t.Fatalf("after Reset, a link event is forgotten: Due() = t0+%v", due.Sub(t0))
			}
		})
	}
}
