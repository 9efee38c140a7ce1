package verdict

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// started is p with running containers started at each of ts (one container each, c0, c1, ...).
func started(p *corev1.Pod, ts ...time.Time) *corev1.Pod {
	for i, t := range ts {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: fmt.Sprintf("c%d", i),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t)}}})
	}
	return p
}

// history is the History of the Node states seen at each time, in order.
func history(seen ...any) *History {
	var h History
	for i := 0; i < len(seen); i += 2 {
		h = h.Observe(seen[i+1].(*corev1.Node), seen[i].(time.Time))
	}
	return &h
}

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// The renumbering rule: the kubelet gave the pod the Node's new address as podIPs (the podIP rule
// sees nothing), but its container started while the Node had the old one.
func TestDecideRenumbered(t *testing.T) {
	old, cur := node("a", "10.0.0.1"), node("a", "10.0.0.2")
	renumbered := history(at(-600), old, at(-120), cur) // seen with .1, then .1 → .2 two minutes ago
	in := func(p *corev1.Pod, h *History, changed time.Time) Input {
		return Input{Pod: p, Node: cur, History: h, Changed: changed, Now: t0, Grace: time.Minute, Enabled: true}
	}
	tests := []struct {
		name       string
		in         Input
		reason     string
		old        []string
		renumbered bool
	}{
		{"started before the renumbering", in(started(pod("a", "10.0.0.2"), at(-3600)), renumbered, at(-120)), Evict, []string{"10.0.0.1"}, true},
		{"started before the remediator saw the Node, then renumbered", in(started(pod("a", "10.0.0.2"), at(-7200)), renumbered, at(-120)), Evict, []string{"10.0.0.1"}, true},
		{"started after the renumbering", in(started(pod("a", "10.0.0.2"), at(-60)), renumbered, at(-120)), NotStale, nil, false},
		{"one container of two started before", in(started(pod("a", "10.0.0.2"), at(-60), at(-3600)), renumbered, at(-120)), Evict, []string{"10.0.0.1"}, true},
		{"renumbered within the grace", in(started(pod("a", "10.0.0.2"), at(-3600)), history(at(-600), old, at(-10), cur), at(-10)), Grace, []string{"10.0.0.1"}, true},
		{"a waiting container, none running", in(with(pod("a", "10.0.0.2"), func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}}}
		}), renumbered, at(-120)), NotStale, nil, false},
		// The bootstrap: the Node had no address until the agent published its first; every
		// hostNetwork pod (the agent's own) started before that is not stale.
		{"the first addresses published", in(started(pod("a", "10.0.0.2"), at(-3600)), history(at(-600), node("a"), at(-120), cur), at(-120)), NotStale, nil, false},
		{"started before the first addresses, then renumbered", in(started(pod("a", "10.0.0.2"), at(-3600)), history(at(-600), node("a"), at(-300), old, at(-120), cur), at(-120)), Evict, []string{"10.0.0.1"}, true},
		{"an address added, none lost", func() Input {
			both := node("a", "10.0.0.1", "10.0.0.2")
			i := in(started(pod("a", "10.0.0.1"), at(-3600)), history(at(-600), old, at(-120), both), at(-120))
			i.Node = both
			return i
		}(), NotStale, nil, false},
		{"a change and back", in(started(pod("a", "10.0.0.2"), at(-3600)), history(at(-600), cur, at(-300), old, at(-120), cur), at(-120)), NotStale, nil, false},
		{"started during the change and back", in(started(pod("a", "10.0.0.2"), at(-200)), history(at(-600), cur, at(-300), old, at(-120), cur), at(-120)), Evict, []string{"10.0.0.1"}, true},
		// Unknown: kubectl nodeaddr stale, a remediator that restarted since: the podIP rule alone.
		{"unknown history", in(started(pod("a", "10.0.0.2"), at(-3600)), nil, at(-120)), NotStale, nil, false},
		{"unknown history, podIP rule", in(started(pod("a", "10.0.0.1"), at(-3600)), nil, at(-120)), Evict, []string{"10.0.0.1"}, false},
		{"both rules: the podIP rule says", in(started(pod("a", "10.0.0.1"), at(-3600)), renumbered, at(-120)), Evict, []string{"10.0.0.1"}, false},
		{"pod network", in(with(started(pod("a", "10.244.0.5"), at(-3600)), func(p *corev1.Pod) { p.Spec.HostNetwork = false }), renumbered, at(-120)), NotStale, nil, false},
		{"another node's pod", in(started(pod("b", "10.0.0.2"), at(-3600)), renumbered, at(-120)), NotStale, nil, false},
		{"succeeded", in(with(started(pod("a", "10.0.0.2"), at(-3600)), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), renumbered, at(-120)), NotStale, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(tt.in)
			if v.Reason != tt.reason || !slices.Equal(v.Old, tt.old) || v.Renumbered != tt.renumbered || v.Stale != (tt.reason != NotStale) {
				t.Errorf("got %s old %v renumbered %v (%s / %s), want %s old %v renumbered %v",
					v.Reason, v.Old, v.Renumbered, v.Cause, v.Message, tt.reason, tt.old, tt.renumbered)
			}
		})
	}
}

func TestRenumberedCause(t *testing.T) {
	v := Decide(Input{Pod: started(pod("a", "10.0.0.2"), at(-3600)), Node: node("a", "10.0.0.2"),
		History: history(at(-600), node("a", "10.0.0.1"), at(-120), node("a", "10.0.0.2")), Changed: at(-120), Now: t0, Grace: time.Minute, Enabled: true})
	want := "its container c0 started at 2026-12-06T02:00:00Z, when the Node had [10.0.0.1], which it no longer has (its status.podIPs show the Node's current addresses)"
	if v.Cause != want {
		t.Errorf("Cause = %q, want %q", v.Cause, want)
	}
}

// History: one epoch per InternalIP/ExternalIP set seen, other address types and repeats ignored;
// the first set stands for the time before it was seen, until older epochs are dropped.
func TestHistory(t *testing.T) {
	withHost := node("a", "10.0.0.1")
	withHost.Status.Addresses = append(withHost.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.7"},
		corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: "10.9.9.9"})
	h := *history(at(0), withHost, at(10), withHost, at(20), node("a", "10.0.0.2"))
	if len(h.Epochs) != 2 || fmt.Sprint(h.Epochs[0].Addrs) != "[10.0.0.1 203.0.113.7]" {
		t.Fatalf("epochs %+v, want two, the first [10.0.0.1 203.0.113.7]", h.Epochs)
	}
	for _, tc := range []struct {
		t    time.Time
		want string
	}{{at(-100), "[10.0.0.1 203.0.113.7]"}, {at(0), "[10.0.0.1 203.0.113.7]"}, {at(19), "[10.0.0.1 203.0.113.7]"}, {at(20), "[10.0.0.2]"}, {at(99), "[10.0.0.2]"}} {
		if got, ok := h.At(tc.t); !ok || fmt.Sprint(got) != tc.want {
			t.Errorf("At(%v) = %v, %v; want %s", tc.t, got, ok, tc.want)
		}
	}
	empty := *history(at(0), node("a"), at(10), node("a", "10.0.0.1"), at(20), node("a"), at(30), node("a", "10.0.0.2"))
	for _, tc := range []struct {
		t    time.Time
		want string
	}{{at(-5), "[10.0.0.1]"}, {at(5), "[10.0.0.1]"}, {at(25), "[10.0.0.2]"}, {at(35), "[10.0.0.2]"}} {
		if got, ok := empty.At(tc.t); !ok || fmt.Sprint(got) != tc.want {
			t.Errorf("without addresses: At(%v) = %v, %v; want %s (the next set)", tc.t, got, ok, tc.want)
		}
	}
	for i := range maxEpochs {
		h = h.Observe(node("a", fmt.Sprintf("10.0.1.%d", i)), at(100+i))
	}
	if len(h.Epochs) != maxEpochs || !h.Truncated {
		t.Fatalf("%d epochs, truncated %v; want %d, true", len(h.Epochs), h.Truncated, maxEpochs)
	}
	if _, ok := h.At(at(50)); ok {
		t.Error("At before a truncated history is known")
	}
	if got, ok := h.At(at(100)); !ok || fmt.Sprint(got) != "[10.0.1.0]" {
		t.Errorf("At(100) = %v, %v", got, ok)
	}
}
