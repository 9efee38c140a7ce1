package discovery

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Server is one STUN server, as configured: a host (an IP literal or a DNS name) and a port.
type Server struct {
	Host string
	Port uint16
}

// String is the server's host:port, its label in metrics and logs.
func (s Server) String() string { return net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port))) }

// ParseServers reads --external-ip-discovery: comma-separated stun:HOST:PORT items (an IPv6
// literal in brackets; the port is required). stuns: (TLS) and turn: are refused.
func ParseServers(s string) ([]Server, error) {
	var out []Server
	seen := map[Server]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		srv, err := parseServer(item)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		if seen[srv] {
			return nil, fmt.Errorf("%q: listed twice", item)
		}
		seen[srv] = true
		out = append(out, srv)
	}
	return out, nil
}

func parseServer(item string) (Server, error) {
	scheme, rest, ok := strings.Cut(item, ":")
	if !ok || rest == "" {
		return Server{}, errors.New("not stun:HOST:PORT")
	}
	switch strings.ToLower(scheme) {
	case "stun":
	case "stuns", "turn", "turns":
		return Server{}, fmt.Errorf("scheme %s is not supported: only stun (a Binding request over UDP)", scheme)
	default:
		return Server{}, errors.New("not stun:HOST:PORT")
	}
	host, port, err := net.SplitHostPort(strings.TrimPrefix(rest, "//"))
	if err != nil {
		return Server{}, errors.New("not stun:HOST:PORT (an IPv6 address goes in brackets: stun:[2001:db8::1]:3478)")
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return Server{}, fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() {
			return Server{}, fmt.Errorf("%s is not a unicast address", host)
		}
		return Server{Host: ip.Unmap().String(), Port: uint16(p)}, nil
	}
	if !validHostname(host) {
		return Server{}, fmt.Errorf("host %q is neither an IP address nor a DNS name", host)
	}
	return Server{Host: strings.ToLower(strings.TrimSuffix(host, ".")), Port: uint16(p)}, nil
}

// validHostname checks RFC 1123 host name syntax: dot-separated labels of letters, digits and
// inner hyphens, 63 characters each, 253 in all, not all-numeric (that would be a bad IP).
func validHostname(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	numeric := true
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			switch {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				numeric = false
			case c >= '0' && c <= '9':
			default:
				return false
			}
		}
	}
	return !numeric
}
