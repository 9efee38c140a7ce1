package agent

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/watcher"
)

// dadKernel is an IPv6 host on eth0 whose route source is its GUA; dup lists its addresses whose
// duplicate address detection failed (flagged dadfailed, as the kernel leaves a static address).
type dadKernel struct {
	mu  sync.Mutex
	dup []string
}

func (k *dadKernel) set(dup ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dup = dup
}

func (k *dadKernel) RouteSource(netip.Addr) (netip.Addr, error) {
	return netip.MustParseAddr("2001:db8:1::10"), nil
}

func (k *dadKernel) Addresses() ([]resolver.LocalAddr, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := []resolver.LocalAddr{{IP: netip.MustParseAddr("2001:db8:1::10"), LinkIndex: 2, Link: "eth0", PrefixLen: 64, PreferredLft: 0xFFFFFFFF}}
	for _, ip := range k.dup {
		out = append(out, resolver.LocalAddr{IP: netip.MustParseAddr(ip), LinkIndex: 2, Link: "eth0", PrefixLen: 64,
			PreferredLft: 0xFFFFFFFF, Flags: unix.IFA_F_DADFAILED | unix.IFA_F_PERMANENT})
	}
	return out, nil
}

// An address refused because its DAD failed, though the policy prefers it (a ULA before the GUA),
// is never published and is named once in a Warning Event DuplicateAddress on the Node, however
// many resolutions refuse it; another such address gets its own warning.
func TestAgentWarnsOncePerDuplicateAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newClient(registered(""))
		k := &dadKernel{}
		k.set("fd00:1::10")
		sig := watcher.NewSignal()
		rec := record.NewFakeRecorder(100)
		cfg := config(client, nil, sig)
		cfg.Loop.Kernel = k
		cfg.Publisher.Recorder = rec
		cfg.Loop.Policy = resolver.Policy{Managed: []resolver.AddressType{resolver.InternalIP},
			Targets: []resolver.Target{{Type: resolver.InternalIP, IP: netip.MustParseAddr("2001:db8:53::1")}},
			Types: map[resolver.AddressType]resolver.TypePolicy{resolver.InternalIP: {CIDRs: []resolver.CIDRRule{
				{Prefix: netip.MustParsePrefix("fd00::/8")}, {Prefix: netip.MustParsePrefix("2000::/3")}}}}}
		a := newAgent(t, cfg)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		step := func() { sig.Raise(time.Now()); time.Sleep(time.Second); synctest.Wait() }
		time.Sleep(time.Second)
		synctest.Wait()
		step()
		step()
		if got, want := addresses(t, client), "[{InternalIP 2001:db8:1::10} {Hostname node-a}] taints=0"; got != want {
			t.Fatalf("node %s, want %s", got, want)
		}
		k.set("fd00:1::10", "fd00:1::11")
		step()
		step()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		var warnings []string
		var updated string
		for len(rec.Events) > 0 {
			switch e := <-rec.Events; {
			case strings.HasPrefix(e, "Warning "):
				warnings = append(warnings, e)
			case strings.HasPrefix(e, "Normal AddressesUpdated "):
				updated = e
			}
		}
		const why = " is not published: duplicate address detection failed (the kernel flags it dadfailed: another host on the link holds it); " +
			"remove it from one of the hosts (a static address must then be added again for DAD to run)"
		want := []string{"Warning DuplicateAddress fd00:1::10 on interface eth0" + why, "Warning DuplicateAddress fd00:1::11 on interface eth0" + why}
		if strings.Join(warnings, "\n") != strings.Join(want, "\n") {
			t.Errorf("warnings\n%s\nwant\n%s", strings.Join(warnings, "\n"), strings.Join(want, "\n"))
		}
		// The Event of the write explains the refusal too.
		if !strings.Contains(updated, "\n- InternalIP IPv6 fd00:1::10 (interface eth0): rejected: duplicate address detection failed\n") {
			t.Errorf("AddressesUpdated Event %q does not explain the refusal", updated)
		}
	})
}
