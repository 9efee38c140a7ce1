package kube

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver/explanation"
)

// The agent's recorder folds a Node's eleventh AddressesUpdated Event of ten minutes, each with its
// own explanation, into one whose message stays the newest as it is: within the admission policy's
// bound, and readable by kubectl nodeaddr explain (client-go's default would prefix it and take a
// full message past 1024).
func TestCorrelatorKeepsFoldedMessagesBounded(t *testing.T) {
	c := record.NewEventCorrelatorWithOptions(CorrelatorOptions())
	var folded int
	for i := range 12 {
		ip := fmt.Sprintf("10.0.0.%d", i)
		msg := explanation.Format(fmt.Sprintf("Addresses changed from [] to [{InternalIP %s}]", ip), []explanation.Line{
			{Type: "InternalIP", Family: "IPv4", Address: ip, From: "route to 192.0.2.1", Chosen: true,
				Reason: "chosen" + strings.Repeat(".", 2000)}}, vocab.EventMessageLimit)
		r, err := c.EventCorrelate(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-a.%d", i), Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "node-a"}, Reason: vocab.ReasonAddressesUpdated, Type: corev1.EventTypeNormal,
			Message: msg, Source: corev1.EventSource{Component: vocab.EventComponent, Host: "node-a"}})
		if err != nil || r.Skip {
			t.Fatalf("event %d: %v (skipped %v)", i, err, r != nil && r.Skip)
		}
		if r.Event.Name != fmt.Sprintf("node-a.%d", i) {
			folded++
		}
		if len(r.Event.Message) > vocab.EventMessageLimit || r.Event.Message != msg {
			t.Errorf("event %d: %d bytes, the message changed: %v", i, len(r.Event.Message), r.Event.Message != msg)
		}
	}
	if folded == 0 {
		t.Error("no Event was folded: the test does not reach the aggregation")
	}
}
