package publisher

import (
	"encoding/json"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// annotationValue is a's value for the published addresses (in status order), "": remove the key.
func annotationValue(a vocab.AnnotationSpec, addrs []resolver.Address) string {
	family := resolver.IPv4
	if a.Form == vocab.FormIPv6 || a.Form == vocab.FormIPv6CIDR {
		family = resolver.IPv6
	}
	var parts []string
	for _, ad := range addrs {
		if a.Type != "" && string(ad.Type) != string(a.Type) {
			continue
		}
		fam := resolver.FamilyOf(ad.IP)
		switch a.Form {
		case vocab.FormIPs:
			parts = append(parts, ad.IP.String())
		case vocab.FormIPv4, vocab.FormIPv6:
			if fam == family {
				return ad.IP.String()
			}
		case vocab.FormIPv4CIDR, vocab.FormIPv6CIDR:
			if fam == family {
				return ad.Prefix().String()
			}
		}
	}
	return strings.Join(parts, ",")
}

// annotationChanges returns the desired value of each key whose value on the Node differs ("" removes
// the key); nil when nothing is to change.
func annotationChanges(current map[string]string, specs []vocab.AnnotationSpec, addrs []resolver.Address) map[string]string {
	var out map[string]string
	for _, a := range specs {
		want := annotationValue(a, addrs)
		have, ok := current[a.Key]
		if (!ok && want == "") || (ok && want != "" && have == want) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[a.Key] = want
	}
	return out
}

// annotationsPatch writes changes (value "" removes the key) without touching other annotations.
// Each changed key carries a `test` of the value read, or of null for an absent key (which
// gopkg.in/evanphx/json-patch.v4 treats as "absent"). A Node without annotations has no map to
// patch into: a JSON merge patch with the resourceVersion read is used instead.
func annotationsPatch(node *corev1.Node, changes map[string]string) (types.PatchType, []byte, error) {
	if len(node.Annotations) == 0 {
		b, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": node.ResourceVersion, "annotations": annotationsMerge(node, changes)},
		})
		return types.MergePatchType, b, err
	}
	b, err := json.Marshal(annotationOps(node, changes))
	return types.JSONPatchType, b, err
}

// annotationsMerge is changes as a JSON merge patch's annotations (null removes a key the Node has).
func annotationsMerge(node *corev1.Node, changes map[string]string) map[string]any {
	ann := map[string]any{}
	for k, v := range changes {
		if v != "" {
			ann[k] = v
		} else if _, ok := node.Annotations[k]; ok {
			ann[k] = nil
		}
	}
	return ann
}

// annotationOps are the JSON patch operations that make changes, each behind a `test` of the
// value read.
func annotationOps(node *corev1.Node, changes map[string]string) []jsonPatchOp {
	keys := slices.Sorted(maps.Keys(changes))
	ops := make([]jsonPatchOp, 0, 2*len(keys))
	for _, k := range keys {
		// A JSON pointer (RFC 6901) escapes ~ as ~0 and / as ~1.
		path := "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
		var old any
		if v, ok := node.Annotations[k]; ok {
			old = v
		}
		ops = append(ops, jsonPatchOp{Op: "test", Path: path, Value: old})
		if v := changes[k]; v != "" {
			ops = append(ops, jsonPatchOp{Op: "add", Path: path, Value: v})
		} else {
			ops = append(ops, jsonPatchOp{Op: "remove", Path: path})
		}
	}
	return ops
}

// inStatusOrder lists the managed addresses in status order, with their prefix lengths from resolved.
func inStatusOrder(status []corev1.NodeAddress, managed []resolver.AddressType, resolved []resolver.Address) []resolver.Address {
	var out []resolver.Address
	for _, na := range status {
		t := resolver.AddressType(na.Type)
		ip, err := netip.ParseAddr(na.Address)
		if !slices.Contains(managed, t) || err != nil {
			continue
		}
		a := resolver.Address{Type: t, IP: ip.Unmap()}
		if i := slices.IndexFunc(resolved, func(r resolver.Address) bool { return r.Type == t && r.IP == a.IP }); i >= 0 {
			a.PrefixLen = resolved[i].PrefixLen
		}
		out = append(out, a)
	}
	return out
}

// Preview is what the publisher would write for s to a Node without addresses and annotations
// (--dry-run); the annotations are nil without specs.
func Preview(s resolver.State, specs []vocab.AnnotationSpec) ([]corev1.NodeAddress, map[string]string) {
	merged := merge(nil, s.Managed, s.Addresses)
	if len(specs) == 0 {
		return merged, nil
	}
	out := map[string]string{}
	maps.Copy(out, annotationChanges(nil, specs, inStatusOrder(merged, s.Managed, s.Addresses)))
	return merged, out
}
