package inspect

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The newest explanation record is found in either log format, among the agent's other records and
// client-go's; a log without one says so.
func TestLastExplanation(t *testing.T) {
	const older = `[{"type":"InternalIP","family":"IPv4","address":"192.0.2.2","from":"route to 8.8.8.8","chosen":true,"reason":"chosen"}]`
	const newer = `[{"type":"InternalIP","family":"IPv4","address":"192.0.2.3","from":"route to 8.8.8.8","chosen":true,"reason":"chosen"},` +
		`{"type":"InternalIP","family":"IPv6","chosen":false,"reason":"no target of this family: not published; the Node's entry of this type and family is removed"}]`
	text := func(ts, state, explain string) string {
		return fmt.Sprintf("time=%s level=INFO msg=\"addresses explained\" node=node-a state=%q explain=%q\n", ts, state, explain)
	}
	json := func(ts, state, explain string) string {
		return fmt.Sprintf(`{"time":%q,"level":"INFO","msg":"addresses explained","node":"node-a","state":%q,"explain":%q}`+"\n", ts, state, explain)
	}
	want := []string{"InternalIP IPv4 192.0.2.3 (route to 8.8.8.8): chosen",
		"InternalIP IPv6: no target of this family: not published; the Node's entry of this type and family is removed"}
	for _, tc := range []struct {
		name, log string
		ok        bool
	}{
		{"text", "time=t0 level=INFO msg=\"nodeaddr starting\" node=node-a\n" + text("t1", "[InternalIP=192.0.2.2]", older) +
			"I1204 07:52:17.943392 8643 reflector.go:1] \"addresses explained\" is not this\n" + text("t2", "[InternalIP=192.0.2.3]", newer) +
			"time=t3 level=INFO msg=\"addresses updated\" node=node-a\n", true},
		{"json", json("t1", "[InternalIP=192.0.2.2]", older) + `{"time":"t2","level":"INFO","msg":"desired addresses changed"}` + "\n" +
			json("t2", "[InternalIP=192.0.2.3]", newer), true},
		{"none", "time=t0 level=INFO msg=\"nodeaddr starting\" node=node-a\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ok, err := LastExplanation([]byte(tc.log))
			if err != nil || ok != tc.ok {
				t.Fatalf("LastExplanation = %v, %v; want ok %v", ok, err, tc.ok)
			}
			if !ok {
				return
			}
			var got []string
			for _, l := range e.Lines {
				got = append(got, l.String())
			}
			if e.Time != "t2" || e.State != "[InternalIP=192.0.2.3]" || strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("explanation at %s of %s:\n%s\nwant at t2 of [InternalIP=192.0.2.3]:\n%s", e.Time, e.State, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// The explanation comes from the newest AddressesUpdated Event of nodeaddr's about the Node: not
// one about a Node of the same name deleted since (another UID), not another component's; the
// newest being an older agent's (the change alone) means none, and the caller reads the log.
func TestLastExplanationEvent(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "uid-2"}}
	ev := func(name, uid, component, msg string, sec int64) corev1.Event {
		return corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "node-a", UID: types.UID(uid)},
			Reason:         "AddressesUpdated", Message: msg, Source: corev1.EventSource{Component: component},
			LastTimestamp: metav1.Unix(1764921600+sec, 0)}
	}
	const explained = "Addresses changed from [] to [{InternalIP 192.0.2.3}]\n+ InternalIP IPv4 192.0.2.3 (route to 192.0.2.1): chosen"
	const changeOnly = "Addresses changed from [] to [{InternalIP 192.0.2.4}]"
	for _, tc := range []struct {
		name   string
		events []corev1.Event
		want   string // the Event read, "" for none
	}{
		{"newest of its own", []corev1.Event{ev("node-a.2", "uid-2", "nodeaddr", explained, 2), ev("node-a.1", "uid-2", "nodeaddr", explained, 1),
			ev("node-a.9", "uid-1", "nodeaddr", explained, 9), ev("node-a.8", "uid-2", "kubelet", explained, 8)}, "default/node-a.2"},
		{"the same second: the later name", []corev1.Event{ev("node-a.18a", "uid-2", "nodeaddr", explained, 2), ev("node-a.18b", "uid-2", "nodeaddr", explained, 2)}, "default/node-a.18b"},
		{"folded by the recorder", []corev1.Event{ev("node-a.1", "", "nodeaddr", "(combined from similar events): "+explained, 1)}, "default/node-a.1"},
		{"an older agent's", []corev1.Event{ev("node-a.1", "uid-2", "nodeaddr", explained, 1), ev("node-a.2", "uid-2", "nodeaddr", changeOnly, 2)}, ""},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ok, err := LastExplanationEvent(node, tc.events)
			if err != nil || ok != (tc.want != "") || e.Event != tc.want {
				t.Fatalf("LastExplanationEvent = %q, %v, %v; want %q", e.Event, ok, err, tc.want)
			}
			if ok && (len(e.Lines) != 1 || e.Lines[0].String() != "InternalIP IPv4 192.0.2.3 (route to 192.0.2.1): chosen" || e.State != "[{InternalIP 192.0.2.3}]") {
				t.Errorf("explanation %+v", e)
			}
		})
	}
	if _, _, err := LastExplanationEvent(node, []corev1.Event{ev("node-a.1", "uid-2", "nodeaddr", changeOnly+"\nnot a line", 1)}); err == nil ||
		!strings.Contains(err.Error(), "event default/node-a.1: line 2") {
		t.Errorf("a message Format did not write: %v", err)
	}
}
