package agent

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/netnstest"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/watcher"
)

// TestMain runs the package's tests inside a throwaway network namespace (see netnstest); the
// kernel tests skip when it could not be made, the others do not need it.
func TestMain(m *testing.M) { os.Exit(netnstest.Main(m)) }

// lines is a dry run's output, safe to read while the agent writes.
type lines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.Split(strings.TrimSpace(l.b.String()), "\n")
	return s[len(s)-1]
}

// A policy rule that moves the route toward the target to another table is followed through its
// netlink event, with no periodic resync to fall back on; so is a route change in the table the
// new rule points at, and the rule's deletion.
func TestKernelAgentFollowsPolicyRules(t *testing.T) {
	netnstest.Require(t)
	// No IPv6 on the links and their carrier up before the agent starts: no event of the links'
	// own settling may reach the agent and resolve in place of the rule's.
	netnstest.Sysctl(t, "net.ipv6.conf.default.disable_ipv6", "1")
	netnstest.Veth(t, "aa")
	netnstest.Veth(t, "ab")
	for _, dev := range []string{"aa", "aap", "ab", "abp"} {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if b, err := os.ReadFile("/sys/class/net/" + dev + "/operstate"); err == nil && strings.TrimSpace(string(b)) == "up" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is not up", dev)
			}
		}
	}
	netnstest.IP(t, "addr", "add", "192.0.2.10/24", "dev", "aa")
	netnstest.IP(t, "addr", "add", "203.0.113.10/24", "dev", "ab")
	netnstest.IP(t, "addr", "add", "203.0.113.11/24", "dev", "ab")
	netnstest.IP(t, "route", "add", "default", "via", "192.0.2.1")
	netnstest.IP(t, "route", "add", "default", "via", "203.0.113.1", "dev", "ab", "src", "203.0.113.10", "table", "100")

	out := &lines{}
	a := newAgent(t, Config{
		NodeName: nodeName,
		Loop: resolver.LoopConfig{Kernel: resolver.Netlink{},
			// 203.0.113.11 is a secondary address (the second in its subnet on ab).
			Policy: resolver.Policy{Managed: managed, AllowSecondary: true,
				Targets: []resolver.Target{{Type: resolver.ExternalIP, IP: netip.MustParseAddr("198.51.100.1")}}},
			Debounce: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond},
		Watcher: &watcher.Config{},
		DryRun:  out,
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	follow := func(step, want string) {
		t.Helper()
		want = `{"addresses":[{"type":"ExternalIP","address":"` + want + `"}]}`
		for deadline := time.Now().Add(20 * time.Second); out.last() != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the agent printed %q last, want %s", step, out.last(), want)
			}
		}
	}
	follow("start", "192.0.2.10")
	netnstest.IP(t, "rule", "add", "to", "198.51.100.0/24", "lookup", "100", "priority", "1000")
	t.Cleanup(func() { _ = exec.Command("ip", "rule", "del", "priority", "1000").Run() }) // if the test stops early
	follow("ip rule add", "203.0.113.10")
	netnstest.IP(t, "route", "replace", "default", "via", "203.0.113.1", "dev", "ab", "src", "203.0.113.11", "table", "100")
	follow("ip route replace in the rule's table", "203.0.113.11")
	netnstest.IP(t, "rule", "del", "priority", "1000")
	follow("ip rule del", "192.0.2.10")
}
