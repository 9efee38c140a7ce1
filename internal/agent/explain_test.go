package agent

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// dualStack routes IPv4 targets through 192.0.2.2 and IPv6 targets through fd00::2, the dual-stack
// host of docs/configuration.md's --explain example.
type dualStack struct{}

func (dualStack) RouteSource(t netip.Addr) (netip.Addr, error) {
	if t.Is4() {
		return netip.MustParseAddr("192.0.2.2"), nil
	}
	return netip.MustParseAddr("fd00::2"), nil
}

func (dualStack) Addresses() ([]resolver.LocalAddr, error) {
	var out []resolver.LocalAddr
	for _, p := range []string{"192.0.2.2/24", "fd00::2/64"} {
		pfx := netip.MustParsePrefix(p)
		out = append(out, resolver.LocalAddr{IP: pfx.Addr(), PrefixLen: pfx.Bits(), LinkIndex: 2, Link: "eth0",
			Label: "eth0", PreferredLft: 0xFFFFFFFF})
	}
	return out, nil
}

// explainConfig is docs/configuration.md's --explain example: --internal-ip-target=192.0.2.1 with
// the default ExternalIP targets, --dry-run --explain.
func explainConfig(out *bytes.Buffer, asJSON bool) Config {
	cfg := config(nil, nil, nil)
	cfg.Loop.Kernel = dualStack{}
	cfg.Loop.Policy = resolver.Policy{Managed: []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP},
		Targets: []resolver.Target{
			{Type: resolver.InternalIP, IP: netip.MustParseAddr("192.0.2.1")},
			{Type: resolver.ExternalIP, IP: netip.MustParseAddr("8.8.8.8")},
			{Type: resolver.ExternalIP, IP: netip.MustParseAddr("2001:4860:4860::8888")},
		}}
	cfg.DryRun, cfg.Explain, cfg.ExplainJSON = out, true, asJSON
	return cfg
}

func TestDryRunExplainsEveryAddress(t *testing.T) {
	var out bytes.Buffer
	if _, err := newAgent(t, explainConfig(&out, false)).RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"InternalIP IPv4 192.0.2.2 (route to 192.0.2.1): chosen",
		"InternalIP IPv6: " + resolver.NoTarget,
		"ExternalIP IPv4 192.0.2.2 (route to 8.8.8.8): dropped: equals an InternalIP (--external-ip-equal-internal=drop)",
		"ExternalIP IPv6 fd00::2 (route to 2001:4860:4860::8888): chosen",
		`{"addresses":[{"type":"InternalIP","address":"192.0.2.2"},{"type":"ExternalIP","address":"fd00::2"}]}`,
	}, "\n") + "\n"
	if got := out.String(); got != want {
		t.Errorf("dry run printed:\n%s\nwant:\n%s", got, want)
	}
}

func TestDryRunExplainJSON(t *testing.T) {
	var out bytes.Buffer
	if _, err := newAgent(t, explainConfig(&out, true)).RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("printed %d lines, want the explanation and the addresses:\n%s", len(lines), out.String())
	}
	var got struct{ Explain []resolver.Explained }
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	var chosen []string
	for _, e := range got.Explain {
		if e.Chosen {
			chosen = append(chosen, string(e.Type)+" "+e.Family+" "+e.Address+" "+e.From)
		}
	}
	want := []string{"InternalIP IPv4 192.0.2.2 route to 192.0.2.1", "ExternalIP IPv6 fd00::2 route to 2001:4860:4860::8888"}
	if strings.Join(chosen, ";") != strings.Join(want, ";") {
		t.Errorf("chosen %q, want %q", chosen, want)
	}
}

// Addresses the state holds that the selection did not choose are explained by the rules applied
// after it: STUN's mapped ExternalIP (with discovery) and the loop's hold-down.
func TestExplainRulesAfterSelection(t *testing.T) {
	var out bytes.Buffer
	cfg := explainConfig(&out, false)
	e := &explainer{kernel: cfg.Loop.Kernel, policy: cfg.Loop.Policy, discovery: true}
	ip := netip.MustParseAddr
	s := resolver.State{Managed: cfg.Loop.Policy.Managed, Addresses: []resolver.Address{
		{Type: resolver.InternalIP, IP: ip("192.0.2.2")},
		{Type: resolver.InternalIP, IP: ip("fd00::9")},
		{Type: resolver.ExternalIP, IP: ip("2001:db8::7")},
	}}
	var got []string
	for _, l := range e.explain(s, nil, false) {
		got = append(got, l.String())
	}
	want := []string{
		"InternalIP IPv4 192.0.2.2 (route to 192.0.2.1): chosen",
		"InternalIP IPv6: " + resolver.NoTarget,
		"ExternalIP IPv4 192.0.2.2 (route to 8.8.8.8): chosen now, but not in the state printed (resolved again since)",
		"ExternalIP IPv6 fd00::2 (route to 2001:4860:4860::8888): replaced by 2001:db8::7",
		"InternalIP IPv6 fd00::9 (previous address): held during removal grace (the loop's hold-down)",
		"ExternalIP IPv6 2001:db8::7 (STUN discovery): chosen: the mapped address replaces the route source",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("explanation:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
