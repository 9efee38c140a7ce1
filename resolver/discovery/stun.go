package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/pion/stun/v3"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// Prober asks one server which address and port a packet from src arrives from.
type Prober interface {
	Probe(ctx context.Context, src netip.Addr, server Server) (netip.Addr, error)
}

// STUN sends RFC 8489 Binding requests over UDP (github.com/pion/stun).
type STUN struct {
	// Resolver looks up server names, one record type per probe; nil: net.DefaultResolver.
	Resolver *net.Resolver
	// RTO is the first retransmission timeout (RFC 8489 section 6.2.1: 500 ms), then doubled.
	RTO time.Duration
}

// errNoFamily marks a server that has no address of the family probed, but one of the other: it
// takes no part in that family's vote. A lookup that fails is a failed probe.
var errNoFamily = errors.New("no address of this family")

// Probe sends a Binding request from a fresh UDP socket bound to src (a NAT's conntrack entry for
// an old socket would keep an old mapping) and returns the XOR-MAPPED-ADDRESS (MAPPED-ADDRESS from
// an RFC 3489 server). It retransmits until ctx ends.
func (p STUN) Probe(ctx context.Context, src netip.Addr, server Server) (netip.Addr, error) {
	dst, err := p.resolve(ctx, server, resolver.FamilyOf(src))
	if err != nil {
		return netip.Addr{}, err
	}
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("bind %s: %w", src, err)
	}
	defer conn.Close() //nolint:errcheck // a UDP socket has nothing to flush
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	req, err := stun.Build(stun.TransactionID, stun.BindingRequest, stun.Fingerprint)
	if err != nil {
		return netip.Addr{}, err
	}
	rto := p.RTO
	if rto <= 0 {
		rto = 500 * time.Millisecond
	}
	buf := make([]byte, 1500)
	for {
		if _, err := conn.WriteToUDPAddrPort(req.Raw, dst); err != nil {
			if ctx.Err() != nil { // the deadline set when ctx ended, not the network
				return netip.Addr{}, fmt.Errorf("no response from %s: %w", dst, context.Cause(ctx))
			}
			return netip.Addr{}, fmt.Errorf("send to %s: %w", dst, err)
		}
		if ctx.Err() != nil {
			return netip.Addr{}, fmt.Errorf("no response from %s: %w", dst, context.Cause(ctx))
		}
		wait := time.Now().Add(rto)
		if d, ok := ctx.Deadline(); ok && d.Before(wait) {
			wait = d
		}
		_ = conn.SetReadDeadline(wait)
		addr, err := readResponse(conn, buf, dst, req.TransactionID)
		if err == nil || !isTimeout(err) {
			return addr, err
		}
		if ctx.Err() != nil {
			return netip.Addr{}, fmt.Errorf("no response from %s: %w", dst, context.Cause(ctx))
		}
		rto *= 2
	}
}

// readResponse reads until the response to transaction id arrives from dst or the deadline passes.
func readResponse(conn *net.UDPConn, buf []byte, dst netip.AddrPort, id [stun.TransactionIDSize]byte) (netip.Addr, error) {
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return netip.Addr{}, err
		}
		if from.Addr().Unmap() != dst.Addr().Unmap() || from.Port() != dst.Port() || !stun.IsMessage(buf[:n]) {
			continue
		}
		m := &stun.Message{Raw: append([]byte(nil), buf[:n]...)}
		if err := m.Decode(); err != nil || m.TransactionID != id {
			continue
		}
		return mappedAddress(m)
	}
}

// mappedAddress reads the address of a Binding response.
func mappedAddress(m *stun.Message) (netip.Addr, error) {
	if m.Type == stun.BindingError {
		var code stun.ErrorCodeAttribute
		if err := code.GetFrom(m); err == nil {
			return netip.Addr{}, fmt.Errorf("binding error %d %s", code.Code, code.Reason)
		}
		return netip.Addr{}, errors.New("binding error")
	}
	if m.Type != stun.BindingSuccess {
		return netip.Addr{}, fmt.Errorf("unexpected %s", m.Type)
	}
	var ip net.IP
	var xor stun.XORMappedAddress
	if err := xor.GetFrom(m); err == nil {
		ip = xor.IP
	} else {
		var mapped stun.MappedAddress
		if err := mapped.GetFrom(m); err != nil {
			return netip.Addr{}, errors.New("binding response without a mapped address")
		}
		ip = mapped.IP
	}
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, fmt.Errorf("mapped address %v is not an IP", ip)
	}
	return addr.Unmap(), nil
}

// resolve gives the server's address in family f.
func (p STUN) resolve(ctx context.Context, s Server, f resolver.Family) (netip.AddrPort, error) {
	if ip, err := netip.ParseAddr(s.Host); err == nil {
		if resolver.FamilyOf(ip) != f {
			return netip.AddrPort{}, errNoFamily
		}
		return netip.AddrPortFrom(ip, s.Port), nil
	}
	r := p.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ip, err := lookupFamily(ctx, r.LookupNetIP, s.Host, f)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("look up %s: %w", s.Host, err)
	}
	return netip.AddrPortFrom(ip, s.Port), nil
}

// lookupFunc is net.Resolver.LookupNetIP.
type lookupFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

// lookupFamily looks up host's address of family f alone (one A or AAAA query). When the name has
// none, a lookup of the other family tells a name of the other family only (errNoFamily) from one
// that has no address (the first lookup's error).
func lookupFamily(ctx context.Context, lookup lookupFunc, host string, f resolver.Family) (netip.Addr, error) {
	ips, err := lookup(ctx, network(f), host)
	for _, ip := range ips {
		if ip = ip.Unmap(); resolver.FamilyOf(ip) == f {
			return ip, nil
		}
	}
	if err == nil {
		err = &net.DNSError{Err: "no address", Name: host, IsNotFound: true}
	}
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		return netip.Addr{}, err
	}
	other := resolver.IPv6
	if f == resolver.IPv6 {
		other = resolver.IPv4
	}
	if ips, oerr := lookup(ctx, network(other), host); oerr == nil && len(ips) > 0 {
		return netip.Addr{}, fmt.Errorf("%w (%s only)", errNoFamily, other)
	}
	return netip.Addr{}, err
}

func network(f resolver.Family) string {
	if f == resolver.IPv6 {
		return "ip6"
	}
	return "ip4"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
