package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

var updateShapes = flag.Bool("update-shapes", false, "rewrite the host-shape table in docs/configuration.md from this run")

const (
	shapesBegin = "<!-- host-shape table: written by `cd test && go test ./e2e -run TestDefaultTargetsByHostShape -update-shapes`; do not edit -->"
	shapesEnd   = "<!-- end of the host-shape table -->"
	// oldDefault is the default before the apiserver target and the ExternalIP's global scope: the
	// Internet route's source for both types, whatever its range.
	oldDefault = "--internal-ip-target=8.8.8.8,2001:4860:4860::8888 --external-ip-scope=any"
)

var shapesTable = harness.DocTable{File: filepath.Join(harness.RepoDir(), "docs", "configuration.md"), Begin: shapesBegin, End: shapesEnd}

// hostShape is one kind of host: its links (built in ns, the peers in peer), the API server's
// address (the kubeconfig's server, as the EndpointSlice would list it), and what each default
// publishes, as the dry run prints the Node's addresses.
type hostShape struct {
	name, desc string
	links      func(ns, peer *harness.Netns)
	apiServer  string
	old, new   string
}

// uplink adds dev with cidrs to ns (IPv6 without duplicate-address detection), peered in peer.
func uplink(ns, peer *harness.Netns, dev string, cidrs ...string) {
	ns.Link(dev, peer, "p-"+dev)
	for _, c := range cidrs {
		if strings.Contains(c, ":") {
			ns.IP("-6", "addr", "add", c, "dev", dev, "nodad")
		} else {
			ns.IP("addr", "add", c, "dev", dev)
		}
	}
}

var hostShapes = []hostShape{
	{name: "single NIC", desc: "eth0 192.0.2.10/24, default route; API server 192.0.2.5 on the same link",
		links: func(ns, peer *harness.Netns) {
			uplink(ns, peer, "eth0", "192.0.2.10/24")
			ns.IP("route", "add", "default", "via", "192.0.2.1")
		}, apiServer: "192.0.2.5",
		old: "[InternalIP=192.0.2.10]", new: "[InternalIP=192.0.2.10]"},
	{name: "Vagrant NAT", desc: "eth0 10.0.2.15/24 (NAT, the same on every VM), default route; eth1 192.168.56.11/24 host-only, API server 192.168.56.10",
		links: func(ns, peer *harness.Netns) {
			uplink(ns, peer, "eth0", "10.0.2.15/24")
			ns.IP("route", "add", "default", "via", "10.0.2.2")
			uplink(ns, peer, "eth1", "192.168.56.11/24")
		}, apiServer: "192.168.56.10",
		old: "[InternalIP=10.0.2.15]", new: "[InternalIP=192.168.56.11]"},
	{name: "management + cluster networks", desc: "eth0 198.51.100.11/24 (management), default route; eth1 10.10.0.11/24, API server 10.20.0.10 routed through 10.10.0.1",
		links: func(ns, peer *harness.Netns) {
			uplink(ns, peer, "eth0", "198.51.100.11/24")
			ns.IP("route", "add", "default", "via", "198.51.100.1")
			uplink(ns, peer, "eth1", "10.10.0.11/24")
			ns.IP("route", "add", "10.20.0.0/16", "via", "10.10.0.1")
		}, apiServer: "10.20.0.10",
		old: "[InternalIP=198.51.100.11]", new: "[InternalIP=10.10.0.11 ExternalIP=198.51.100.11]"},
	{name: "control-plane node", desc: "the Vagrant NAT shape, the API server on the node's own 192.168.56.10 (the route to itself)",
		links: func(ns, peer *harness.Netns) {
			uplink(ns, peer, "eth0", "10.0.2.15/24")
			ns.IP("route", "add", "default", "via", "10.0.2.2")
			uplink(ns, peer, "eth1", "192.168.56.10/24")
		}, apiServer: "192.168.56.10",
		old: "[InternalIP=10.0.2.15]", new: "[InternalIP=192.168.56.10]"},
	{name: "no default route", desc: "eth0 10.10.0.11/24 and no default route (an air-gapped site); API server 10.10.0.10",
		links: func(ns, peer *harness.Netns) {
			uplink(ns, peer, "eth0", "10.10.0.11/24")
		}, apiServer: "10.10.0.10",
		old: "[]", new: "[InternalIP=10.10.0.11]"},
	{name: "IPv6-only", desc: "eth0 2001:db8::10/64, default route; eth1 fd00:10::11/64, API server fd00:10::10",
		links: func(ns, peer *harness.Netns) {
			uplink(ns, peer, "eth0", "2001:db8::10/64")
			ns.IP("-6", "route", "add", "default", "via", "2001:db8::1")
			uplink(ns, peer, "eth1", "fd00:10::11/64")
		}, apiServer: "fd00:10::10",
		old: "[InternalIP=2001:db8::10]", new: "[InternalIP=fd00:10::11 ExternalIP=2001:db8::10]"},
	{name: "dual-stack", desc: "eth0 192.0.2.10/24 and 2001:db8::10/64, default routes; eth1 10.10.0.11/24 and fd00:10::11/64, API server 10.10.0.10 (IPv4 only, as the kubernetes Service's EndpointSlice of an IPv4-primary cluster)",
		links: func(ns, peer *harness.Netns) {
			uplink(ns, peer, "eth0", "192.0.2.10/24", "2001:db8::10/64")
			ns.IP("route", "add", "default", "via", "192.0.2.1")
			ns.IP("-6", "route", "add", "default", "via", "2001:db8::1")
			uplink(ns, peer, "eth1", "10.10.0.11/24", "fd00:10::11/64")
		}, apiServer: "10.10.0.10",
		old: "[InternalIP=192.0.2.10 InternalIP=2001:db8::10]", new: "[InternalIP=10.10.0.11 InternalIP=2001:db8::10 ExternalIP=192.0.2.10]"},
}

// Which addresses each default publishes on each host shape, measured with the real binary's dry
// run in a network namespace (no packet is sent: the kernel is only asked for routes). The new
// default takes the API server's address from the kubeconfig's server, as the agent does from the
// kubernetes EndpointSlice. docs/configuration.md shows the table (-update-shapes writes it).
func TestDefaultTargetsByHostShape(t *testing.T) {
	harness.RequireE2E(t)
	rows := []string{"| host | old default (`" + oldDefault + "`) | default (`apiserver` first) |", "| --- | --- | --- |"}
	for _, s := range hostShapes {
		t.Run(s.name, func(t *testing.T) {
			ns, peer := harness.NewNetns(t, "shape"), harness.NewNetns(t, "peer")
			s.links(ns, peer)
			if got := dryRun(t, ns, "none", strings.Fields(oldDefault)...); got != s.old {
				t.Errorf("old default: %s, want %s", got, s.old)
			}
			if got := dryRun(t, ns, kubeconfigFor(t, s.apiServer)); got != s.new {
				t.Errorf("default: %s, want %s", got, s.new)
			}
		})
		rows = append(rows, fmt.Sprintf("| %s: %s | `%s` | `%s` |", s.name, s.desc, s.old, s.new))
	}
	want := strings.Join(rows, "\n") + "\n"
	if *updateShapes {
		if err := shapesTable.Write(want); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, table, _, err := shapesTable.Split(); err != nil {
		t.Fatal(err)
	} else if table != want {
		t.Errorf("the host-shape table in docs/configuration.md is stale; run `cd test && go test ./e2e -run TestDefaultTargetsByHostShape -update-shapes`.\nhave:\n%swant:\n%s", table, want)
	}
}

// kubeconfigFor writes a kubeconfig whose server is apiServer; a dry run only reads it.
func kubeconfigFor(t *testing.T, apiServer string) string {
	host := apiServer
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	path := filepath.Join(harness.AgentDir(t), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: unused}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, host)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// dryRun runs `nodeaddr --dry-run --run-once` in ns and returns the addresses it prints.
func dryRun(t *testing.T, ns *harness.Netns, kubeconfig string, args ...string) string {
	t.Helper()
	code, out := harness.RunAgent(t, ns, harness.AgentOptions{Kubeconfig: kubeconfig,
		Args: append([]string{"--dry-run", "--run-once", "--node-name=shape"}, args...)}, 30*time.Second)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, `{"addresses"`) {
			var got struct {
				Addresses []corev1.NodeAddress `json:"addresses"`
			}
			if err := json.Unmarshal([]byte(l), &got); err != nil {
				t.Fatal(err)
			}
			return harness.FormatAddrs(got.Addresses)
		}
	}
	t.Fatalf("no addresses line in %q", out)
	return ""
}

// The ExternalIP's scope on the Vagrant shape, with the real binary's dry run: the default does not
// publish the NAT's private 10.0.2.15 and says why; an operator's choice publishes it as before
// (--external-ip-scope=any, or naming the targets, even the default ones).
func TestExternalIPScopeOnVagrant(t *testing.T) {
	harness.RequireE2E(t)
	i := slices.IndexFunc(hostShapes, func(s hostShape) bool { return s.name == "Vagrant NAT" })
	ns, peer := harness.NewNetns(t, "scope"), harness.NewNetns(t, "peer")
	hostShapes[i].links(ns, peer)
	kubeconfig := kubeconfigFor(t, hostShapes[i].apiServer)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "[InternalIP=192.168.56.11]"},
		{[]string{"--external-ip-scope=any"}, "[InternalIP=192.168.56.11 ExternalIP=10.0.2.15]"},
		{[]string{"--external-ip-target=8.8.8.8,2001:4860:4860::8888"}, "[InternalIP=192.168.56.11 ExternalIP=10.0.2.15]"},
		{[]string{"--external-ip-cidrs=10.0.2.0/24"}, "[InternalIP=192.168.56.11 ExternalIP=10.0.2.15]"},
	} {
		if got := dryRun(t, ns, kubeconfig, tc.args...); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.args, got, tc.want)
		}
	}
	code, out := harness.RunAgent(t, ns, harness.AgentOptions{Kubeconfig: kubeconfig,
		Args: []string{"--dry-run", "--run-once", "--explain", "--node-name=shape"}}, 30*time.Second)
	want := "ExternalIP IPv4 10.0.2.15 (route to 8.8.8.8): rejected: not globally routable, so not an ExternalIP (--external-ip-scope=any publishes it): private-use (RFC 1918)"
	if code != 0 || !strings.Contains(out, want+"\n") {
		t.Errorf("--explain: exit %d\n%s\nwant the line %q", code, out, want)
	}
}
