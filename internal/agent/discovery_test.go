package agent

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/resolver/discovery"
	"github.com/nodeaddr/nodeaddr/watcher"
)

// nat maps every probe per server, as a NAT seen by each STUN server.
type nat struct {
	mu sync.Mutex
	m  map[string]netip.Addr
}

func (n *nat) set(m map[string]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.m = map[string]netip.Addr{}
	for s, a := range m {
		n.m[s] = netip.MustParseAddr(a)
	}
}

func (n *nat) Probe(_ context.Context, _ netip.Addr, s discovery.Server) (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m[s.String()], nil
}

// With discovery the assembled agent writes the discovered ExternalIP (never the private route
// source) in one write, follows a NAT change found by the re-check, and turns a disagreement
// into a Warning Event on the Node and no write.
func TestAgentWithDiscovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newClient(registered(""))
		k := &kernel{}
		k.set("10.0.1.10")
		n := &nat{}
		n.set(map[string]string{"192.0.2.1:3478": "203.0.113.10", "192.0.2.2:3478": "203.0.113.10"})
		rec := record.NewFakeRecorder(10)
		cfg := config(client, k, watcher.NewSignal())
		cfg.Publisher.Recorder = rec
		cfg.Discovery = &discovery.Config{Servers: []discovery.Server{{Host: "192.0.2.1", Port: 3478}, {Host: "192.0.2.2", Port: 3478}},
			Interval: time.Minute, StaleAfter: time.Hour, Prober: n}
		a := newAgent(t, cfg)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := addresses(t, client), "[{ExternalIP 203.0.113.10} {Hostname node-a}] taints=0"; got != want {
			t.Fatalf("node %s, want %s", got, want)
		}
		if got := patches(client); !slices.Equal(got, []string{"nodes/status", "nodes"}) {
			t.Fatalf("patches %v, want one status write (no private ExternalIP first) and the taint", got)
		}

		n.set(map[string]string{"192.0.2.1:3478": "203.0.113.20", "192.0.2.2:3478": "203.0.113.20"})
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got, want := addresses(t, client), "[{ExternalIP 203.0.113.20} {Hostname node-a}] taints=0"; got != want {
			t.Fatalf("after the NAT changed: node %s, want %s", got, want)
		}

		n.set(map[string]string{"192.0.2.1:3478": "203.0.113.20", "192.0.2.2:3478": "198.51.100.7"})
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := patches(client); len(got) != 3 {
			t.Errorf("patches %v, want none for the disagreement", got)
		}
		var events []string
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.HasPrefix(e, "Warning ") {
				events = append(events, e)
			}
		}
		if len(events) != 1 || !strings.HasPrefix(events[0], "Warning ExternalIPDisagreement no IPv4 ExternalIP from STUN") ||
			!strings.Contains(events[0], "192.0.2.2:3478=198.51.100.7") {
			t.Errorf("events %q, want one Warning ExternalIPDisagreement naming the answers", events)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}
