package node

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// steadyWindow is how long the agent's pod must keep running, unrestarted, after a renumbering
// (the kubelet's liveness probe would have failed it three times over by then if it probed a
// stale address).
const steadyWindow = 5 * time.Minute

// withV4 is expectedAddresses with the uplink's IPv4 address replaced by v4.
func withV4(node, v4 string) []corev1.NodeAddress {
	out := expectedAddresses(node)
	for i := range out {
		if out[i].Address == uplinkV4 {
			out[i].Address = v4
		}
	}
	return out
}

// renumbering: the uplink's IPv4 address moves, make-before-break (add the new address, then
// delete the old one; the secondary is promoted) and then break-before-make (delete, then add the
// new address and the default route, as a DHCP client does); the Node follows each move without
// ever losing the family, and the agent's pod keeps running for steadyWindow without a restart.
func (w *world) renumbering(t *testing.T) {
	w.t = t
	name := w.node.Name
	const second, third = "192.0.2.20", "192.0.2.30"
	states := [][]corev1.NodeAddress{expectedAddresses(name), withV4(name, second), withV4(name, third)}
	w.ns.Sysctl("net.ipv4.conf.all.promote_secondaries", "1")
	w.ns.Sysctl("net.ipv4.conf.eth0.promote_secondaries", "1")
	pod := w.agentPod()
	nw := w.watchNode()

	moved := time.Now()
	w.ns.IP("addr", "add", second+"/24", "dev", "eth0")
	w.ns.IP("addr", "del", uplinkV4+"/24", "dev", "eth0")
	w.waitAddresses(states[1])
	mbb := time.Since(moved)

	moved = time.Now()
	w.ns.IP("addr", "del", second+"/24", "dev", "eth0")
	w.ns.IP("addr", "add", third+"/24", "dev", "eth0")
	w.ns.IP("route", "add", "default", "via", gatewayV4, "dev", "eth0")
	w.waitAddresses(states[2])
	bbm := time.Since(moved)

	// Only whole states: never a list without the IPv4 InternalIP, never a mix.
	for _, n := range nw.finish() {
		ok := false
		for _, s := range states {
			ok = ok || reflect.DeepEqual(n.Status.Addresses, s)
		}
		if !ok {
			t.Errorf("Node version %s has addresses %v, not one of %v", n.ResourceVersion, n.Status.Addresses, states)
		}
	}

	// The pod keeps running: watch its restart count over the window (a bound, then an assertion on
	// the count, not on time).
	deadline := time.Now().Add(steadyWindow)
	var p *corev1.Pod
	for time.Now().Before(deadline) { // measured window: steadyWindow, the pod checked every 5 s
		p = w.agentPod()
		if p == nil || p.UID != pod.UID {
			t.Fatalf("the agent pod was replaced during the window")
		}
		if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
			t.Errorf("the agent restarted %d times after the renumbering (last state %+v)", n,
				p.Status.ContainerStatuses[0].LastTerminationState)
			break
		}
		time.Sleep(5 * time.Second) // measured window: the check period
	}
	// Recorded, not asserted: what the kubelet does with a hostNetwork pod's IPs, and with an
	// ordinary pod's (the web pod of scenario 1, if it runs).
	web := "no web pod"
	if wp := w.pod("default", "app=web"); wp != nil {
		web = fmt.Sprintf("web pod host IPs %v", wp.Status.HostIPs)
	}
	report(t, "make-before-break→Node %s, break-before-make→Node %s, restarts %d over %s; agent pod IPs %v host IPs %v ready %v; %s",
		mbb.Round(time.Millisecond), bbm.Round(time.Millisecond), p.Status.ContainerStatuses[0].RestartCount,
		steadyWindow, p.Status.PodIPs, p.Status.HostIPs, podReady(p), web)
}
