package publisher

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The detector counts another writer's change once per write of ours, whatever the order of our
// write's response and the informer's deliveries, and never counts an older state as one.
func TestOverwriteDetectorOrders(t *testing.T) {
	ours := []corev1.NodeAddress{external("203.0.113.7")}
	older := testNode("5", nil)  // before our write
	echo := testNode("6", ours)  // our write, as the informer delivers it
	revert := testNode("7", nil) // another writer's change after it
	later := testNode("8", nil)  // and another
	type step struct {
		node     *corev1.Node // delivered by the informer; nil: our write's response (echo) arrives
		overwrit bool         // this step reports an overwrite
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"response, older, echo, revert", []step{{nil, false}, {older, false}, {echo, false}, {revert, true}, {later, false}}},
		{"echo before the response, then revert", []step{{echo, false}, {nil, false}, {revert, true}, {later, false}}},
		{"echo and revert before the response", []step{{echo, false}, {revert, true}, {nil, false}, {later, false}}},
		{"older state only", []step{{nil, false}, {older, false}}},
		{"echo only", []step{{nil, false}, {echo, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := overwriteDetector{managed: manageExternal, fieldManager: "nodeaddr",
				fight: revertBackoff{Threshold: 3, Window: time.Minute, Base: time.Second, Max: time.Minute}}
			d.writing(echo.Status.Addresses)
			for i, s := range tc.steps {
				if s.node == nil {
					d.wrote(echo)
					continue
				}
				ow := d.observe(s.node, time.Now())
				if (ow != nil) != s.overwrit {
					t.Fatalf("step %d (rv %s): overwrite %v, want %v", i, s.node.ResourceVersion, ow != nil, s.overwrit)
				}
			}
		})
	}
}
