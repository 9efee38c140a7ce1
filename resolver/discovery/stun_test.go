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
	"golang.org/x/net/dns/dnsmessage"

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

// lookupFamily asks for the probed family's records alone: a failing query of the other family
// never fails the probe; a name with no record of the family but addresses of the other takes no
// part in the vote (errNoFamily); a name that cannot be looked up, or has no address, is a failed
// probe.
func TestLookupFamily(t *testing.T) {
	notFound := &net.DNSError{Err: "no such host", Name: "n", IsNotFound: true}
	servfail := &net.DNSError{Err: "server misbehaving", Name: "n", IsTemporary: true}
	type answer struct {
		ips []string
		err error
	}
	for _, tc := range []struct {
		name    string
		v4, v6  answer
		f       resolver.Family
		want    string
		noFam   bool
		failed  bool
		lookups int
	}{
		{"both, v4", answer{ips: []string{"192.0.2.1"}}, answer{ips: []string{"2001:db8::1"}}, resolver.IPv4, "192.0.2.1", false, false, 1},
		{"both, v6", answer{ips: []string{"192.0.2.1"}}, answer{ips: []string{"2001:db8::1", "2001:db8::2"}}, resolver.IPv6, "2001:db8::1", false, false, 1},
		{"v4-mapped answer", answer{ips: []string{"::ffff:192.0.2.1"}}, answer{err: notFound}, resolver.IPv4, "192.0.2.1", false, false, 1},
		{"AAAA fails, v4 probe", answer{ips: []string{"192.0.2.1"}}, answer{err: servfail}, resolver.IPv4, "192.0.2.1", false, false, 1},
		{"AAAA fails, v6 probe", answer{ips: []string{"192.0.2.1"}}, answer{err: servfail}, resolver.IPv6, "", false, true, 1},
		{"v4 only, v6 probe", answer{ips: []string{"192.0.2.1"}}, answer{err: notFound}, resolver.IPv6, "", true, true, 2},
		{"v6 only, v4 probe", answer{err: notFound}, answer{ips: []string{"2001:db8::1"}}, resolver.IPv4, "", true, true, 2},
		{"v6 only, empty A answer", answer{}, answer{ips: []string{"2001:db8::1"}}, resolver.IPv4, "", true, true, 2},
		{"no address", answer{err: notFound}, answer{err: notFound}, resolver.IPv4, "", false, true, 2},
		{"A missing, AAAA fails", answer{err: notFound}, answer{err: servfail}, resolver.IPv4, "", false, true, 2},
	} {
		var lookups int
		lookup := func(_ context.Context, network, _ string) ([]netip.Addr, error) {
			lookups++
			a := tc.v4
			switch network {
			case "ip6":
				a = tc.v6
			case "ip4":
			default:
				t.Fatalf("%s: lookup of network %q, want ip4 or ip6", tc.name, network)
			}
			var out []netip.Addr
			for _, s := range a.ips {
				out = append(out, netip.MustParseAddr(s))
			}
			return out, a.err
		}
		got, err := lookupFamily(t.Context(), lookup, "n", tc.f)
		if (err != nil) != tc.failed || errors.Is(err, errNoFamily) != tc.noFam {
			t.Errorf("%s: error %v, want failed %v, errNoFamily %v", tc.name, err, tc.failed, tc.noFam)
		} else if err == nil && got.String() != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
		if lookups != tc.lookups {
			t.Errorf("%s: %d lookups, want %d", tc.name, lookups, tc.lookups)
		}
	}
}

// dnsServer answers A and AAAA queries on loopback from a table; a name or type it does not hold
// gets an empty NOERROR answer, and an entry with rcode set answers with that code.
type dnsRecord struct {
	ips   []string
	rcode dnsmessage.RCode
}

func newDNSServer(t *testing.T, zone map[string]map[dnsmessage.Type]dnsRecord) *net.Resolver {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() }) //nolint:errcheck
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			rec := zone[q.Name.String()][q.Type]
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: rec.rcode})
			b.EnableCompression()
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			for _, s := range rec.ips {
				rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}
				ip := netip.MustParseAddr(s)
				if ip.Is4() {
					_ = b.AResource(rh, dnsmessage.AResource{A: ip.As4()})
				} else {
					_ = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: ip.As16()})
				}
			}
			msg, err := b.Finish()
			if err == nil {
				_, _ = conn.WriteTo(msg, from)
			}
		}
	}()
	addr := conn.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

// With Go's own resolver against a real DNS server: a name whose AAAA query fails (SERVFAIL)
// still gives the IPv4 probe its address, and a name with A records only takes no part in the
// IPv6 vote.
func TestSTUNResolveDNS(t *testing.T) {
	a, aaaa := dnsmessage.TypeA, dnsmessage.TypeAAAA
	r := newDNSServer(t, map[string]map[dnsmessage.Type]dnsRecord{
		"both.test.":   {a: {ips: []string{"192.0.2.1"}}, aaaa: {ips: []string{"2001:db8::1"}}},
		"v6fail.test.": {a: {ips: []string{"192.0.2.2"}}, aaaa: {rcode: dnsmessage.RCodeServerFailure}},
		"v4only.test.": {a: {ips: []string{"192.0.2.3"}}},
		"gone.test.":   {a: {rcode: dnsmessage.RCodeNameError}, aaaa: {rcode: dnsmessage.RCodeNameError}},
	})
	p := STUN{Resolver: r}
	for _, tc := range []struct {
		host   string
		f      resolver.Family
		want   string
		noFam  bool
		failed bool
	}{
		{"both.test.", resolver.IPv4, "192.0.2.1:3478", false, false},
		{"both.test.", resolver.IPv6, "[2001:db8::1]:3478", false, false},
		{"v6fail.test.", resolver.IPv4, "192.0.2.2:3478", false, false},
		{"v6fail.test.", resolver.IPv6, "", false, true},
		{"v4only.test.", resolver.IPv6, "", true, true},
		{"gone.test.", resolver.IPv4, "", false, true},
	} {
		got, err := p.resolve(t.Context(), Server{Host: tc.host, Port: 3478}, tc.f)
		if (err != nil) != tc.failed || errors.Is(err, errNoFamily) != tc.noFam {
			t.Errorf("%s %s: error %v, want failed %v, errNoFamily %v", tc.host, tc.f, err, tc.failed, tc.noFam)
		} else if err == nil && got.String() != tc.want {
			t.Errorf("%s %s: got %s, want %s", tc.host, tc.f, got, tc.want)
		}
	}
}
