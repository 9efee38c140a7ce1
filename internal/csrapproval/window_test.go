package csrapproval

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The window is open from its latest opening for its span, and settles earlier only once the
// Node's newest CSR, filed after that opening, is decided and none is pending, never before its
// minimum time open.
func TestWindowIsOpen(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	pending := func(d time.Duration) filing { return filing{created: at(d)} }
	done := func(d time.Duration) filing { return filing{created: at(d), decided: true} }
	for _, tc := range []struct {
		name  string
		opens []time.Duration // openings, from t0
		now   time.Duration
		own   []filing
		want  bool
	}{
		{"never opened", nil, 0, nil, false},
		{"just opened, no CSR yet", []time.Duration{0}, 0, nil, true},
		{"no CSR until the end of the span", []time.Duration{0}, 3*time.Minute - time.Millisecond, nil, true},
		{"span over", []time.Duration{0}, 3 * time.Minute, nil, false},
		{"span over with a CSR still pending", []time.Duration{0}, 3 * time.Minute, []filing{pending(time.Second)}, false},
		{"reopened extends the span", []time.Duration{0, 2 * time.Minute}, 4 * time.Minute, nil, true},
		{"own CSR pending", []time.Duration{0}, 10 * time.Second, []filing{pending(time.Second)}, true},
		{"own CSR decided after the opening: settled", []time.Duration{0}, 10 * time.Second, []filing{done(time.Second)}, false},
		{"decided, but within the minimum time open", []time.Duration{0}, 4 * time.Second, []filing{done(time.Second)}, true},
		{"decided CSR created within the clock tolerance before the opening", []time.Duration{0}, 10 * time.Second, []filing{done(-time.Second)}, false},
		{"only an old decided CSR (agent restart, same addresses)", []time.Duration{0}, 10 * time.Second, []filing{done(-time.Hour)}, true},
		{"newest decided, an older one still pending", []time.Duration{0}, 10 * time.Second, []filing{pending(-time.Hour), done(time.Second)}, true},
		{"newest decided among older decided ones", []time.Duration{0}, 10 * time.Second, []filing{done(-time.Hour), done(time.Second), done(-time.Minute)}, false},
		// make-before-break: the second address change reopens the window after the first CSR was
		// approved; the second CSR is still to come.
		{"reopened after the first CSR was decided", []time.Duration{0, 8 * time.Second}, 10 * time.Second, []filing{done(time.Second)}, true},
		{"reopened, first decided long before the reopening", []time.Duration{0, 30 * time.Second}, 40 * time.Second, []filing{done(time.Second)}, true},
		{"reopened, second CSR decided", []time.Duration{0, 30 * time.Second}, 40 * time.Second, []filing{done(time.Second), done(31 * time.Second)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := window{span: DefaultWindow, minOpen: minOpen}
			for _, o := range tc.opens {
				w.open(at(o), "")
			}
			if got := w.isOpen(at(tc.now), tc.own); got != tc.want {
				t.Errorf("isOpen = %v, want %v", got, tc.want)
			}
		})
	}
}

// A window closed (settled) stays closed until the next opening.
func TestWindowClose(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	w := window{span: DefaultWindow, minOpen: minOpen}
	w.open(t0, "")
	w.close()
	if w.isOpen(t0.Add(time.Second), nil) {
		t.Fatal("open after close")
	}
	w.open(t0.Add(2*time.Second), "")
	if !w.isOpen(t0.Add(3*time.Second), nil) {
		t.Fatal("closed after a new opening")
	}
}

func TestWindowRecheckAt(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	w := window{span: DefaultWindow, minOpen: minOpen}
	w.open(t0, "")
	if got := w.recheckAt(t0.Add(time.Second)); !got.Equal(t0.Add(minOpen)) {
		t.Errorf("recheckAt within the minimum = %v, want %v", got, t0.Add(minOpen))
	}
	if got := w.recheckAt(t0.Add(minOpen)); !got.IsZero() {
		t.Errorf("recheckAt after the minimum = %v, want zero", got)
	}
}

func TestAddressesChanged(t *testing.T) {
	n := func(addrs ...string) *corev1.Node {
		out := &corev1.Node{}
		for i := 0; i < len(addrs); i += 2 {
			out.Status.Addresses = append(out.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(addrs[i]), Address: addrs[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		old, after *corev1.Node
		want       bool
	}{
		{"heartbeat", n("InternalIP", "10.0.0.5", "Hostname", "a"), n("InternalIP", "10.0.0.5", "Hostname", "a"), false},
		{"InternalIP moved", n("InternalIP", "10.0.0.5"), n("InternalIP", "10.0.0.6"), true},
		{"address added (make-before-break)", n("InternalIP", "10.0.0.5"), n("InternalIP", "10.0.0.5", "InternalIP", "10.0.0.6"), true},
		{"ExternalIP written by the kubelet", n("InternalIP", "10.0.0.5"), n("InternalIP", "10.0.0.5", "ExternalIP", "192.0.2.7"), true},
		{"type changed", n("InternalIP", "10.0.0.5"), n("ExternalIP", "10.0.0.5"), true},
		{"order changed", n("InternalIP", "10.0.0.5", "InternalIP", "10.0.0.6"), n("InternalIP", "10.0.0.6", "InternalIP", "10.0.0.5"), true},
		{"no old Node", nil, n("InternalIP", "10.0.0.5"), false},
		{"deleted", n("InternalIP", "10.0.0.5"), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AddressesChanged(tc.old, tc.after); got != tc.want {
				t.Errorf("AddressesChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// The window's watch starts from the earliest resource version its openings gave since the last
// start, or with a LIST when any opening gave none; a start or a close forgets them.
func TestWindowStart(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		opens []string // each opening's resource version
		want  string
	}{
		{"the start: LIST", []string{""}, ""},
		{"a Node change: watch from it", []string{"120"}, "120"},
		{"two changes: the earliest", []string{"120", "135"}, "120"},
		{"a change, then the start: LIST", []string{"120", ""}, ""},
		{"the start, then a change: LIST", []string{"", "120"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := window{span: DefaultWindow, minOpen: minOpen}
			for _, rv := range tc.opens {
				w.open(t0, rv)
			}
			if got := w.start(); got != tc.want {
				t.Errorf("start = %q, want %q", got, tc.want)
			}
			if got := w.start(); got != "" {
				t.Errorf("second start = %q, want a LIST (nothing new opened)", got)
			}
		})
	}
	w := window{span: DefaultWindow, minOpen: minOpen}
	w.open(t0, "120")
	w.close()
	w.open(t0.Add(time.Hour), "200")
	if got := w.start(); got != "200" {
		t.Errorf("after close: start = %q, want 200", got)
	}
}
