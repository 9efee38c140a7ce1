package discovery

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/pion/stun/v3"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// responder is a loopback STUN server built from pion's message codec: it answers Binding
// requests with the sender's address, after dropping the first `drop` requests, and records the
// source ports it saw.
type responder struct {
	conn *net.UDPConn
	mu   sync.Mutex
	seen []netip.AddrPort
	drop int
}

func newResponder(t *testing.T, drop int) *responder {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &responder{conn: conn, drop: drop}
	t.Cleanup(func() { _ = conn.Close() })
	go r.serve()
	return r
}

func (r *responder) server() Server {
	ap := r.conn.LocalAddr().(*net.UDPAddr).AddrPort()
	return Server{Host: ap.Addr().String(), Port: ap.Port()}
}

func (r *responder) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := r.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		req := &stun.Message{Raw: append([]byte(nil), buf[:n]...)}
		if req.Decode() != nil || req.Type != stun.BindingRequest {
			continue
		}
		r.mu.Lock()
		r.seen = append(r.seen, from)
		dropped := len(r.seen) <= r.drop
		r.mu.Unlock()
		if dropped {
			continue
		}
		resp := stun.MustBuild(stun.NewTransactionIDSetter(req.TransactionID), stun.BindingSuccess,
			&stun.XORMappedAddress{IP: net.IP(from.Addr().AsSlice()), Port: int(from.Port())}, stun.Fingerprint)
		_, _ = r.conn.WriteToUDPAddrPort(resp.Raw, from)
	}
}

func (r *responder) requests() []netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]netip.AddrPort(nil), r.seen...)
}

func TestSTUNProbe(t *testing.T) {
	r := newResponder(t, 0)
	src := netip.MustParseAddr("127.0.0.1")
	p := STUN{RTO: 50 * time.Millisecond}
	for range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		got, err := p.Probe(ctx, src, r.server())
		cancel()
		if err != nil || got != src {
			t.Fatalf("Probe = %v, %v; want %v", got, err, src)
		}
	}
	seen := r.requests()
	if len(seen) != 2 || seen[0].Port() == seen[1].Port() {
		t.Errorf("requests from %v: want two, from two fresh sockets (two source ports)", seen)
	}
}

func TestSTUNProbeRetransmits(t *testing.T) {
	r := newResponder(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	got, err := STUN{RTO: 20 * time.Millisecond}.Probe(ctx, netip.MustParseAddr("127.0.0.1"), r.server())
	if err != nil || got != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("Probe = %v, %v", got, err)
	}
	seen := r.requests()
	if len(seen) != 3 || seen[0] != seen[2] {
		t.Errorf("requests %v: want 3 from one socket (two dropped, then answered)", seen)
	}
}

func TestSTUNProbeErrors(t *testing.T) {
	// A silent server: the probe ends with the context, as a deadline.
	silent, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close() //nolint:errcheck
	ap := silent.LocalAddr().(*net.UDPAddr).AddrPort()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = STUN{RTO: 20 * time.Millisecond}.Probe(ctx, netip.MustParseAddr("127.0.0.1"), Server{Host: "127.0.0.1", Port: ap.Port()})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("silent server: %v, want a deadline error", err)
	}
	// A source the host does not have cannot be bound.
	_, err = STUN{}.Probe(t.Context(), netip.MustParseAddr("192.0.2.99"), Server{Host: "127.0.0.1", Port: ap.Port()})
	if err == nil {
		t.Error("bound to an address the host does not have")
	}
	// An IPv6 literal takes no part in an IPv4 round.
	_, err = STUN{}.Probe(t.Context(), netip.MustParseAddr("127.0.0.1"), Server{Host: "2001:db8::1", Port: 3478})
	if !errors.Is(err, errNoFamily) {
		t.Errorf("IPv6 server, IPv4 source: %v, want errNoFamily", err)
	}
}

// A name's lookup answers with addresses of both families, or one: ofFamily picks the family's
// first, errNoFamily when there is none of it, and a failed probe when there is no address at all.
func TestOfFamily(t *testing.T) {
	ips := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	for _, tc := range []struct {
		ips    []netip.Addr
		f      resolver.Family
		want   string
		noFam  bool
		failed bool
	}{
		{ips("192.0.2.1", "2001:db8::1"), resolver.IPv4, "192.0.2.1", false, false},
		{ips("192.0.2.1", "2001:db8::1", "2001:db8::2"), resolver.IPv6, "2001:db8::1", false, false},
		{ips("::ffff:192.0.2.1"), resolver.IPv4, "192.0.2.1", false, false},
		{ips("192.0.2.1"), resolver.IPv6, "", true, true},
		{ips("2001:db8::1"), resolver.IPv4, "", true, true},
		{nil, resolver.IPv4, "", false, true},
	} {
		got, err := ofFamily(tc.ips, tc.f)
		if (err != nil) != tc.failed || errors.Is(err, errNoFamily) != tc.noFam {
			t.Errorf("ofFamily(%v, %s): error %v, want failed %v, errNoFamily %v", tc.ips, tc.f, err, tc.failed, tc.noFam)
			continue
		}
		if err == nil && got.String() != tc.want {
			t.Errorf("ofFamily(%v, %s) = %s, want %s", tc.ips, tc.f, got, tc.want)
		}
	}
}
