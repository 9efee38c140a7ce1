package plugin

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventrecord "k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/agent"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// oneHost routes every target through 192.0.2.10 on eth0, its only address.
type oneHost struct{}

func (oneHost) RouteSource(netip.Addr) (netip.Addr, error) {
	return netip.MustParseAddr("192.0.2.10"), nil
}

func (oneHost) Addresses() ([]resolver.LocalAddr, error) {
	return []resolver.LocalAddr{{IP: netip.MustParseAddr("192.0.2.10"), PrefixLen: 24, LinkIndex: 2, Link: "eth0", Label: "eth0",
		PreferredLft: 0xFFFFFFFF}}, nil
}

// kubectl nodeaddr explain works with the agent's log out of reach: it reads the AddressesUpdated
// Event the agent recorded with its write. The agent pod here has no kubelet to serve its log, so
// before the agent wrote anything explain can only say so; after one run of the agent (as
// cmd/nodeaddr assembles it: its client, its Event recorder, a kernel stand-in) it prints the
// explanation from the Event.
func TestExplainWithoutTheAgentsLog(t *testing.T) {
	cp := harness.StartControlPlane(t)
	plugin := harness.MustBuildPlugin(t)
	kubeconfig := harness.Kubeconfig(t, t.TempDir(), cp.Config.Host, cp.AdminToken)
	cs := cp.Admin
	cp.CreateNode(t, harness.NodeSpec{Name: "node-x", Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-x"}}})
	namespaces(t, cs, "kube-system")
	hostPod(t, cs, "kube-system", "nodeaddr-x", "node-x", "192.0.2.10", map[string]string{"app.kubernetes.io/name": "nodeaddr"}, true, 0)
	run := func(args ...string) (string, string, int) {
		c := &cluster{plugin: plugin, kubeconfig: kubeconfig}
		return c.run(t, args...)
	}

	// No Event yet, and the log cannot be read: explain says both.
	if out, errOut, code := run("explain", "node-x"); code == 0 || out != "" ||
		!strings.Contains(errOut, "no AddressesUpdated Event about Node node-x (Events expire after the API server's --event-ttl), "+
			"and reading the log of kube-system/nodeaddr-x failed") {
		t.Fatalf("explain before any Event: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kc, err := kube.NewClient(cp.Config, kube.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	b := eventrecord.NewBroadcaster(eventrecord.WithContext(ctx), eventrecord.WithCorrelatorOptions(kube.CorrelatorOptions()))
	b.StartRecordingToSink(kc.EventSink())
	ag, err := agent.New(agent.Config{
		NodeName: "node-x", Nodes: kc,
		Publisher: publisher.Config{Rate: 10, Burst: 10,
			Recorder: b.NewRecorder(kube.Scheme(), corev1.EventSource{Component: vocab.EventComponent, Host: "node-x"})},
		Loop: resolver.LoopConfig{Kernel: oneHost{},
			Policy: resolver.Policy{Managed: []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP}, Targets: []resolver.Target{
				{Type: resolver.InternalIP, IP: netip.MustParseAddr("198.51.100.1")},
				{Type: resolver.ExternalIP, IP: netip.MustParseAddr("198.51.100.1")}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ag.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// The recorder sends its Events on its own goroutine.
	harness.Eventually(t, 30*time.Second, 50*time.Millisecond, "an AddressesUpdated Event about node-x", func() (bool, string) {
		return len(cp.Events(t, "node-x", vocab.ReasonAddressesUpdated)) > 0, "none"
	})
	b.Shutdown()

	out, errOut, code := run("explain", "node-x")
	if code != 0 || errOut != "" {
		t.Fatalf("explain: exit %d, stderr %q", code, errOut)
	}
	out = regexp.MustCompile(`at \S+ by Event default/node-x\.[0-9a-f]+:`).ReplaceAllString(out, "at <time> by Event default/node-x.<id>:")
	want := `Node node-x, explained at <time> by Event default/node-x.<id>:
Addresses changed from [] to [{InternalIP 192.0.2.10}]
InternalIP IPv4 192.0.2.10 (route to 198.51.100.1): chosen
InternalIP IPv6: ` + resolver.NoTarget + `
ExternalIP IPv4 192.0.2.10 (route to 198.51.100.1): dropped: equals an InternalIP (--external-ip-equal-internal=drop)
ExternalIP IPv6: ` + resolver.NoTarget + "\n"
	if out != want {
		t.Errorf("explain printed:\n%s\nwant:\n%s", out, want)
	}
}
