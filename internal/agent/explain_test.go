package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/watcher"
)

// dualStack routes IPv4 targets through 192.0.2.2 and IPv6 targets through 2001:db8::2, the dual-stack
// host of docs/configuration.md's --explain example.
type dualStack struct{}

func (dualStack) RouteSource(t netip.Addr) (netip.Addr, error) {
	if t.Is4() {
		return netip.MustParseAddr("192.0.2.2"), nil
	}
	return netip.MustParseAddr("2001:db8::2"), nil
}

func (dualStack) Addresses() ([]resolver.LocalAddr, error) {
	var out []resolver.LocalAddr
	for _, p := range []string{"192.0.2.2/24", "2001:db8::2/64"} {
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
		},
		// --external-ip-scope=global, the default: 2001:db8::/32 counts as global.
		Types: map[resolver.AddressType]resolver.TypePolicy{resolver.ExternalIP: {GlobalOnly: true}}}
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
		"ExternalIP IPv6 2001:db8::2 (route to 2001:4860:4860::8888): chosen",
		`{"addresses":[{"type":"InternalIP","address":"192.0.2.2"},{"type":"ExternalIP","address":"2001:db8::2"}]}`,
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
			chosen = append(chosen, e.Type+" "+e.Family+" "+e.Address+" "+e.From)
		}
	}
	want := []string{"InternalIP IPv4 192.0.2.2 route to 192.0.2.1", "ExternalIP IPv6 2001:db8::2 route to 2001:4860:4860::8888"}
	if strings.Join(chosen, ";") != strings.Join(want, ";") {
		t.Errorf("chosen %q, want %q", chosen, want)
	}
}

// The kubelet's --node-ip (its provided-node-ip annotation), a secondary address of the host: the
// pipeline makes it the InternalIP, so the Node carries it, the metrics' addresses are those the
// Node carries, and the explanation says which stage chose what. A new annotation runs the Node's
// stages again without reading the kernel: the InternalIP follows it, and the ExternalIP that now
// equals it is dropped.
func TestAgentProvidedNodeIP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := registered("")
		node.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: "192.0.2.11"}
		client := newClient(node)
		k := &kernel{}
		k.set("192.0.2.10", "192.0.2.11")
		var log bytes.Buffer
		cfg := config(client, k, watcher.NewSignal())
		cfg.Publisher.Logger = slog.New(slog.NewJSONHandler(&log, nil))
		cfg.Loop.Policy = resolver.Policy{Managed: []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP},
			Targets:     []resolver.Target{{Type: resolver.InternalIP, IP: target}, {Type: resolver.ExternalIP, IP: target}},
			ReportLocal: true}
		a := newAgent(t, cfg)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := addresses(t, client), "[{InternalIP 192.0.2.11} {ExternalIP 192.0.2.10} {Hostname node-a}] taints=0"; got != want {
			t.Fatalf("node %s, want %s", got, want)
		}
		if got, want := fmt.Sprint(a.NodeState().DesiredAddresses()), "[InternalIP=192.0.2.11 ExternalIP=192.0.2.10]"; got != want {
			t.Errorf("addresses for metrics %s, want what the Node carries: %s", got, want)
		}

		reads := k.routeReads()
		n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr] = "192.0.2.10"
		if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := addresses(t, client), "[{InternalIP 192.0.2.10} {Hostname node-a}] taints=0"; got != want {
			t.Fatalf("after the new annotation: node %s, want %s", got, want)
		}
		if got, want := fmt.Sprint(a.NodeState().DesiredAddresses()), "[InternalIP=192.0.2.10]"; got != want {
			t.Errorf("after the new annotation: addresses for metrics %s, want %s", got, want)
		}
		if got := k.routeReads(); got != reads {
			t.Errorf("the kernel was read %d times for a new annotation, want none", got-reads)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		const an = "(annotation alpha.kubernetes.io/provided-node-ip)"
		got := fmt.Sprint(explanations(t, &log))
		want := fmt.Sprint([][]string{{
			"InternalIP IPv4 192.0.2.10 (route to 198.51.100.1): replaced by the kubelet's node IP 192.0.2.11",
			"InternalIP IPv6: " + resolver.NoTarget,
			"ExternalIP IPv4 192.0.2.10 (route to 198.51.100.1): chosen",
			"ExternalIP IPv6: " + resolver.NoTarget,
			"InternalIP IPv4 192.0.2.11 " + an + ": chosen: the kubelet's node IP (--node-ip)",
		}, {
			"InternalIP IPv4 192.0.2.10 (route to 198.51.100.1): chosen",
			"InternalIP IPv6: " + resolver.NoTarget,
			"ExternalIP IPv4 192.0.2.10 (route to 198.51.100.1): dropped: equals an InternalIP (--external-ip-equal-internal=drop)",
			"ExternalIP IPv6: " + resolver.NoTarget,
		}})
		if got != want {
			t.Errorf("explanations\n%s\nwant\n%s", got, want)
		}
	})
}
