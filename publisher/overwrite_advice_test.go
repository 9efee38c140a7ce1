package publisher

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The AddressesOverwritten Warning tells the operator how to end the fight: a Node with a
// providerID (a hybrid cluster's cloud Node) points to keeping nodeaddr off it; every Node also
// gets the kubelet's flag, the usual cause on bare metal.
func TestOverwriteAdvice(t *testing.T) {
	for _, tc := range []struct {
		name, providerID string
		want, notWant    []string
	}{
		{name: "bare metal", want: []string{"run it with --cloud-provider=external"},
			notWant: []string{"providerID", "hybrid"}},
		{name: "cloud node", providerID: "aws:///eu-west-1a/i-0123456789abcdef0",
			want: []string{`providerID "aws:///eu-west-1a/i-0123456789abcdef0"`, "docs/hybrid-clusters.md",
				"run it with --cloud-provider=external"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := overwriteAdvice(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: tc.providerID}})
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("advice %q lacks %q", got, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("advice %q mentions %q", got, w)
				}
			}
		})
	}
}
