package publisher

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// fieldPatch replaces the value at path only if it still equals old. Node status.addresses carries a
// merge key (type) that is not unique in dual-stack clusters, so neither a strategic merge patch nor
// server-side apply can write it (kubernetes#79391, #101029); a JSON patch `test` of the old value
// fails (422) only when that field changed. An absent (empty) field falls back to a JSON merge patch
// carrying the resourceVersion (409 on any concurrent write). A nil new list is written empty.
func fieldPatch[T any](path string, old, new []T, resourceVersion string) (types.PatchType, []byte, error) {
	if new == nil {
		new = []T{}
	}
	if len(old) == 0 {
		// path is /a/b: build {"metadata":{"resourceVersion":rv},"a":{"b":new}}
		parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
		var v any = new
		for i := len(parts) - 1; i >= 0; i-- {
			v = map[string]any{parts[i]: v}
		}
		m := v.(map[string]any)
		m["metadata"] = map[string]any{"resourceVersion": resourceVersion}
		b, err := json.Marshal(m)
		return types.MergePatchType, b, err
	}
	b, err := json.Marshal(fieldOps(path, old, new))
	return types.JSONPatchType, b, err
}

// fieldOps replaces the value at path behind a `test` of the value read.
func fieldOps[T any](path string, old, new []T) []jsonPatchOp {
	return []jsonPatchOp{{Op: "test", Path: path, Value: old}, {Op: "replace", Path: path, Value: new}}
}

func addressesPatch(node *corev1.Node, next []corev1.NodeAddress) (types.PatchType, []byte, error) {
	return fieldPatch("/status/addresses", node.Status.Addresses, next, node.ResourceVersion)
}

// statusPatch writes next and, in the same request, the annotation changes that go with it
// (through nodes/status, whose strategy resets only the spec): a consumer of an annotation, such as
// the approver reading the approval record when the kubelet files its CSR, never sees the new
// addresses without it. With both the addresses and the annotations already on the Node, a JSON
// patch `test`s each; otherwise a JSON merge patch carries the resourceVersion read (409 on any
// concurrent write).
func statusPatch(node *corev1.Node, next []corev1.NodeAddress, changes map[string]string) (types.PatchType, []byte, error) {
	if len(changes) == 0 {
		return addressesPatch(node, next)
	}
	if next == nil {
		next = []corev1.NodeAddress{}
	}
	if len(node.Status.Addresses) == 0 || len(node.Annotations) == 0 {
		b, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": node.ResourceVersion, "annotations": annotationsMerge(node, changes)},
			"status":   map[string]any{"addresses": next},
		})
		return types.MergePatchType, b, err
	}
	ops := fieldOps("/status/addresses", node.Status.Addresses, next)
	b, err := json.Marshal(append(ops, annotationOps(node, changes)...))
	return types.JSONPatchType, b, err
}

func taintsPatch(node *corev1.Node, next []corev1.Taint) (types.PatchType, []byte, error) {
	return fieldPatch("/spec/taints", node.Spec.Taints, next, node.ResourceVersion)
}

// isConflict reports whether err means "the object changed underneath", judged by the status the
// API server sent: a 409, or the bare 422 without causes the API server answers when a JSON patch
// operation fails (k8s.io/apiserver endpoints/handlers/patch.go). A validation error or an
// admission denial (a 422 with causes, a 403) is not a conflict: retrying it at once would repeat it.
func isConflict(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	st := se.Status()
	return st.Code == http.StatusUnprocessableEntity && (st.Details == nil || len(st.Details.Causes) == 0)
}
