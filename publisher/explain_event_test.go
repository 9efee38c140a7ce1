package publisher

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/resolver/explanation"
)

// The AddressesUpdated Event of a write carries the explanation of the addresses written, after the
// change, in the text form kubectl nodeaddr explain reads back: the one Event, no other request.
func TestAddressesUpdatedEventCarriesExplanation(t *testing.T) {
	f := newFixture(t, testNode("10", kubeletAddrs()))
	s := externalState("203.0.113.7")
	s.Explanation = []resolver.Explained{
		{Type: "ExternalIP", Family: "IPv4", Address: "203.0.113.7", From: "route to 198.51.100.1", Chosen: true, Reason: "chosen"},
		{Type: "ExternalIP", Family: "IPv6", Reason: "no accepted candidate: not published"},
	}
	f.start(t, s)
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	const change = "Addresses changed from [] to [{ExternalIP 203.0.113.7}]"
	assertEqual(t, "events", f.events(), []string{"Normal AddressesUpdated " + change + "\n" +
		"+ ExternalIP IPv4 203.0.113.7 (route to 198.51.100.1): chosen\n" +
		"- ExternalIP IPv6: no accepted candidate: not published"})
	if got := f.count("create"); got != 0 {
		t.Errorf("%d create requests besides the Event, want none", got)
	}
	m, err := explanation.Parse(addressesUpdatedMessage(nil, []corev1.NodeAddress{external("203.0.113.7")}, s.Explanation))
	if err != nil {
		t.Fatal(err)
	}
	if want := (explanation.Message{Header: change, Lines: s.Explanation}); !reflect.DeepEqual(m, want) {
		t.Errorf("read back %+v, want %+v", m, want)
	}
}

// However long the explanation, the message stays within what the admission policy allows, the
// chosen lines kept.
func TestAddressesUpdatedMessageBounded(t *testing.T) {
	var why []resolver.Explained
	for range 50 {
		why = append(why, resolver.Explained{Type: "InternalIP", Family: "IPv6", Address: "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
			From: "interface a-long-interface-name", Reason: "rejected: not accepted by --internal-ip-cidrs"})
	}
	why = append(why, resolver.Explained{Type: "InternalIP", Family: "IPv6", Address: "2001:db8::1", From: "route to 2001:db8::53", Chosen: true, Reason: "chosen"})
	msg := addressesUpdatedMessage(nil, []corev1.NodeAddress{internal("2001:db8::1")}, why)
	if len(msg) > vocab.EventMessageLimit {
		t.Fatalf("%d bytes, want at most %d", len(msg), vocab.EventMessageLimit)
	}
	m, err := explanation.Parse(msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Lines)+m.More != len(why) || !strings.Contains(msg, "\n+ InternalIP IPv6 2001:db8::1 (route to 2001:db8::53): chosen\n") {
		t.Errorf("%d lines and %d more of %d, the chosen one kept? message:\n%s", len(m.Lines), m.More, len(why), msg)
	}
}
