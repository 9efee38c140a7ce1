package publisher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	cloudproviderapi "k8s.io/cloud-provider/api"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestAddressesPatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old      []corev1.NodeAddress
		next     []corev1.NodeAddress
		wantType types.PatchType
		want     string
	}{
		{
			name:     "old list: test it, then replace it",
			old:      []corev1.NodeAddress{internal("10.0.0.1"), internal("fd00::1"), hostname("node-a")},
			next:     []corev1.NodeAddress{internal("10.0.0.1"), internal("fd00::1"), external("203.0.113.7"), hostname("node-a")},
			wantType: types.JSONPatchType,
			want: `[{"op":"test","path":"/status/addresses","value":[{"type":"InternalIP","address":"10.0.0.1"},{"type":"InternalIP","address":"fd00::1"},{"type":"Hostname","address":"node-a"}]},` +
				`{"op":"replace","path":"/status/addresses","value":[{"type":"InternalIP","address":"10.0.0.1"},{"type":"InternalIP","address":"fd00::1"},{"type":"ExternalIP","address":"203.0.113.7"},{"type":"Hostname","address":"node-a"}]}]`,
		},
		{
			name:     "emptied list is written as [] not null",
			old:      []corev1.NodeAddress{external("203.0.113.7")},
			next:     nil,
			wantType: types.JSONPatchType,
			want:     `[{"op":"test","path":"/status/addresses","value":[{"type":"ExternalIP","address":"203.0.113.7"}]},{"op":"replace","path":"/status/addresses","value":[]}]`,
		},
		{
			name:     "no old list: merge patch with the resourceVersion",
			old:      nil,
			next:     []corev1.NodeAddress{internal("10.0.0.7"), external("203.0.113.7")},
			wantType: types.MergePatchType,
			want:     `{"metadata":{"resourceVersion":"42"},"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.7"},{"type":"ExternalIP","address":"203.0.113.7"}]}}`,
		},
		{
			name:     "empty (not nil) old list counts as absent",
			old:      []corev1.NodeAddress{},
			next:     []corev1.NodeAddress{hostname("node-a")},
			wantType: types.MergePatchType,
			want:     `{"metadata":{"resourceVersion":"42"},"status":{"addresses":[{"type":"Hostname","address":"node-a"}]}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: "42"},
				Status:     corev1.NodeStatus{Addresses: tc.old},
			}
			pt, data, err := addressesPatch(n, tc.next)
			if err != nil {
				t.Fatal(err)
			}
			if pt != tc.wantType {
				t.Errorf("patch type %q, want %q", pt, tc.wantType)
			}
			if string(data) != tc.want {
				t.Errorf("patch\n  %s\nwant\n  %s", data, tc.want)
			}
		})
	}
}

func TestTaintsPatch(t *testing.T) {
	uninit := corev1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	notReady := corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name     string
		old      []corev1.Taint
		wantType types.PatchType
		want     string
	}{
		{
			name:     "other taints kept",
			old:      []corev1.Taint{notReady, uninit},
			wantType: types.JSONPatchType,
			want: `[{"op":"test","path":"/spec/taints","value":[{"key":"node.kubernetes.io/not-ready","effect":"NoSchedule"},{"key":"node.cloudprovider.kubernetes.io/uninitialized","value":"true","effect":"NoSchedule"}]},` +
				`{"op":"replace","path":"/spec/taints","value":[{"key":"node.kubernetes.io/not-ready","effect":"NoSchedule"}]}]`,
		},
		{
			name:     "last taint removed: replaced with []",
			old:      []corev1.Taint{uninit},
			wantType: types.JSONPatchType,
			want: `[{"op":"test","path":"/spec/taints","value":[{"key":"node.cloudprovider.kubernetes.io/uninitialized","value":"true","effect":"NoSchedule"}]},` +
				`{"op":"replace","path":"/spec/taints","value":[]}]`,
		},
		{
			name:     "no taints: merge patch with the resourceVersion",
			old:      nil,
			wantType: types.MergePatchType,
			want:     `{"metadata":{"resourceVersion":"7"},"spec":{"taints":[]}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: "7"}, Spec: corev1.NodeSpec{Taints: tc.old}}
			next, _ := withoutUninitialized(n.Spec.Taints)
			pt, data, err := taintsPatch(n, next)
			if err != nil {
				t.Fatal(err)
			}
			if pt != tc.wantType {
				t.Errorf("patch type %q, want %q", pt, tc.wantType)
			}
			if string(data) != tc.want {
				t.Errorf("patch\n  %s\nwant\n  %s", data, tc.want)
			}
		})
	}
}

// roundTrip returns err as client-go sees it: the Status the API server sent, decoded from JSON.
func roundTrip(t *testing.T, err *apierrors.StatusError) error {
	t.Helper()
	b, jerr := json.Marshal(err.Status())
	if jerr != nil {
		t.Fatal(jerr)
	}
	var s metav1.Status
	if jerr := json.Unmarshal(b, &s); jerr != nil {
		t.Fatal(jerr)
	}
	return apierrors.FromObject(&s)
}

// policyDenial is a ValidatingAdmissionPolicy denial as the API server sends it.
func policyDenial(reason metav1.StatusReason, code int32) *apierrors.StatusError {
	msg := "ValidatingAdmissionPolicy 'nodeaddr-own-node' with binding 'nodeaddr-own-node' denied request: nodeaddr on node 'a' may not modify Node 'b'"
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: code, Reason: reason,
		Message: `nodes "node-a" is forbidden: ` + msg,
		Details: &metav1.StatusDetails{Kind: "nodes", Name: "node-a", Causes: []metav1.StatusCause{{Message: msg}}},
	}}
}

func TestIsConflict(t *testing.T) {
	nodes := schema.GroupResource{Resource: "nodes"}
	// What k8s.io/apiserver endpoints/handlers/patch.go returns when a JSON patch `test` fails.
	failedTest := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "",
		"testing value /status/addresses failed: test failed", 0, false)
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"409 Conflict", apierrors.NewConflict(nodes, "node-a", errors.New("the object has been modified")), true},
		{"409 Conflict, wrapped", fmt.Errorf("patch: %w", apierrors.NewConflict(nodes, "node-a", errors.New("x"))), true},
		{"422 from a failed test, as the API server sends it", failedTest, true},
		{"422 from a failed test, decoded by client-go", roundTrip(t, failedTest), true},
		{"422 Invalid naming the failed test", &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
			Message: "jsonpatch: testing value /status/addresses failed: test failed",
		}}, true},
		{"text naming a failed test, without a status", errors.New("testing value /spec/taints failed: test failed"), false},
		{"422 validation error", apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "node-a", field.ErrorList{
			field.Duplicate(field.NewPath("status", "addresses").Index(1), corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}),
		}), false},
		// As k8s.io/apiserver's validating admission policy dispatcher builds a denial: from
		// admission.NewForbidden, with the policy's reason and its message as a cause.
		{"422 admission policy denial (reason Invalid)", policyDenial(metav1.StatusReasonInvalid, http.StatusUnprocessableEntity), false},
		{"422 admission policy denial, decoded by client-go", roundTrip(t, policyDenial(metav1.StatusReasonInvalid, http.StatusUnprocessableEntity)), false},
		{"403 admission policy denial (reason Forbidden)", policyDenial(metav1.StatusReasonForbidden, http.StatusForbidden), false},
		{"404 NotFound", apierrors.NewNotFound(nodes, "node-a"), false},
		{"403 Forbidden", apierrors.NewForbidden(nodes, "node-a", errors.New("no")), false},
		{"500", apierrors.NewInternalError(errors.New("etcd timeout")), false},
		{"429", apierrors.NewTooManyRequests("slow down", 1), false},
		{"plain error", errors.New("dial tcp 10.96.0.1:443: connect: connection refused"), false},
		{"context deadline", context.DeadlineExceeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isConflict(tc.err); got != tc.want {
				t.Errorf("isConflict(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// The annotations that follow from new addresses travel in the addresses' write: `test`ed JSON
// patch operations on both when the Node has both, a JSON merge patch with the resourceVersion
// when it lacks either (removing only keys it has), the plain addresses patch when no annotation
// changes.
func TestStatusPatch(t *testing.T) {
	next := []corev1.NodeAddress{internal("192.0.2.10")}
	for _, tc := range []struct {
		name        string
		addrs       []corev1.NodeAddress
		annotations map[string]string
		changes     map[string]string
		wantType    types.PatchType
		want        string
	}{
		{
			name: "both present", addrs: []corev1.NodeAddress{internal("192.0.2.9")},
			annotations: map[string]string{"nodeaddr.io/addresses": "192.0.2.9", "gone.io/x": "1", "other": "x"},
			changes:     map[string]string{"nodeaddr.io/addresses": "192.0.2.10", "gone.io/x": ""},
			wantType:    types.JSONPatchType,
			want: `[{"op":"test","path":"/status/addresses","value":[{"type":"InternalIP","address":"192.0.2.9"}]},` +
				`{"op":"replace","path":"/status/addresses","value":[{"type":"InternalIP","address":"192.0.2.10"}]},` +
				`{"op":"test","path":"/metadata/annotations/gone.io~1x","value":"1"},{"op":"remove","path":"/metadata/annotations/gone.io~1x","value":null},` +
				`{"op":"test","path":"/metadata/annotations/nodeaddr.io~1addresses","value":"192.0.2.9"},{"op":"add","path":"/metadata/annotations/nodeaddr.io~1addresses","value":"192.0.2.10"}]`,
		},
		{
			name: "no annotations yet", addrs: []corev1.NodeAddress{hostname(nodeName)},
			changes:  map[string]string{"nodeaddr.io/addresses": "192.0.2.10", "gone.io/x": ""},
			wantType: types.MergePatchType,
			want:     `{"metadata":{"annotations":{"nodeaddr.io/addresses":"192.0.2.10"},"resourceVersion":"7"},"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.10"}]}}`,
		},
		{
			name: "no addresses yet", annotations: map[string]string{"nodeaddr.io/addresses": "192.0.2.9"},
			changes:  map[string]string{"nodeaddr.io/addresses": ""},
			wantType: types.MergePatchType,
			want:     `{"metadata":{"annotations":{"nodeaddr.io/addresses":null},"resourceVersion":"7"},"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.10"}]}}`,
		},
		{
			name: "no annotation changes", addrs: []corev1.NodeAddress{internal("192.0.2.9")},
			wantType: types.JSONPatchType,
			want: `[{"op":"test","path":"/status/addresses","value":[{"type":"InternalIP","address":"192.0.2.9"}]},` +
				`{"op":"replace","path":"/status/addresses","value":[{"type":"InternalIP","address":"192.0.2.10"}]}]`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode("7", tc.addrs)
			n.Annotations = tc.annotations
			pt, data, err := statusPatch(n, next, tc.changes)
			if err != nil {
				t.Fatal(err)
			}
			if pt != tc.wantType || string(data) != tc.want {
				t.Errorf("patch %s %s\nwant %s %s", pt, data, tc.wantType, tc.want)
			}
		})
	}
}
