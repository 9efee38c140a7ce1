package publisher

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodeaddr/nodeaddr/publisher/identity"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// Form is how an annotation spells the addresses of one type.
type Form string

// Annotation value forms.
const (
	FormIPv4     Form = "ipv4"      // "192.0.2.10"
	FormIPv6     Form = "ipv6"      // "2001:db8::10"
	FormIPs      Form = "ips"       // "192.0.2.10,2001:db8::10", in status.addresses order (k3s)
	FormIPv4CIDR Form = "ipv4-cidr" // "192.0.2.10/24", the interface's prefix length (Calico)
	FormIPv6CIDR Form = "ipv6-cidr" // "2001:db8::10/64"
)

var forms = []Form{FormIPv4, FormIPv6, FormIPs, FormIPv4CIDR, FormIPv6CIDR}

// RecordAnnotation is the approval record (identity.RecordAnnotation).
const RecordAnnotation = identity.RecordAnnotation

// RecordSpec is the AnnotationSpec of the approval record.
func RecordSpec() AnnotationSpec { return AnnotationSpec{Key: RecordAnnotation, Form: FormIPs} }

// AnnotationSpec publishes the addresses of Type (every managed type when empty) as Form under Key.
type AnnotationSpec struct {
	Key  string
	Type resolver.AddressType
	Form Form
}

// Value is the annotation's value for the published addresses (in status order), "": remove the key.
func (a AnnotationSpec) Value(addrs []resolver.Address) string {
	var parts []string
	for _, ad := range addrs {
		if a.Type != "" && ad.Type != a.Type {
			continue
		}
		fam := resolver.FamilyOf(ad.IP)
		switch a.Form {
		case FormIPs:
			parts = append(parts, ad.IP.String())
		case FormIPv4, FormIPv6:
			if fam == a.family() {
				return ad.IP.String()
			}
		case FormIPv4CIDR, FormIPv6CIDR:
			if fam == a.family() {
				return ad.Prefix().String()
			}
		}
	}
	return strings.Join(parts, ",")
}

func (a AnnotationSpec) family() resolver.Family {
	if a.Form == FormIPv6 || a.Form == FormIPv6CIDR {
		return resolver.IPv6
	}
	return resolver.IPv4
}

func (a AnnotationSpec) String() string { return a.Key + "=" + formatName(a.Type, a.Form) }

func formatName(t resolver.AddressType, f Form) string {
	switch t {
	case "":
		return string(f)
	case resolver.InternalIP:
		return "internal-" + string(f)
	}
	return "external-" + string(f)
}

// presets are the annotation sets of well-known consumers, by the name --annotations takes.
var presets = map[string][]AnnotationSpec{
	// nodeaddr's own keys, one per type and family.
	"nodeaddr": {
		{"nodeaddr.io/internal-ipv4", resolver.InternalIP, FormIPv4},
		{"nodeaddr.io/internal-ipv6", resolver.InternalIP, FormIPv6},
		{"nodeaddr.io/external-ipv4", resolver.ExternalIP, FormIPv4},
		{"nodeaddr.io/external-ipv6", resolver.ExternalIP, FormIPv6},
	},
	// k3s records its --node-ip and --node-external-ip as comma-separated lists.
	"k3s": {
		{"k3s.io/internal-ip", resolver.InternalIP, FormIPs},
		{"k3s.io/external-ip", resolver.ExternalIP, FormIPs},
	},
	// flannel's public address (the one other nodes' tunnels reach), as k3s sets it.
	"flannel": {
		{"flannel.alpha.coreos.com/public-ip-overwrite", resolver.ExternalIP, FormIPv4},
		{"flannel.alpha.coreos.com/public-ipv6-overwrite", resolver.ExternalIP, FormIPv6},
	},
	// Calico's node addresses (Kubernetes datastore), in CIDR form.
	"calico": {
		{"projectcalico.org/IPv4Address", resolver.InternalIP, FormIPv4CIDR},
		{"projectcalico.org/IPv6Address", resolver.InternalIP, FormIPv6CIDR},
	},
}

// Preset returns a copy of the named preset's annotations.
func Preset(name string) ([]AnnotationSpec, bool) {
	p, ok := presets[name]
	return slices.Clone(p), ok
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	return slices.Sorted(maps.Keys(presets))
}

// ParseAnnotations parses --annotations: comma-separated preset names (PresetNames) and KEY=FORMAT
// items (FORMAT: internal-|external- then a Form). A preset contributes the keys of the managed
// types; an item of an unmanaged type, a preset with no managed key and a key given twice are errors.
func ParseAnnotations(s string, managed []resolver.AddressType) ([]AnnotationSpec, error) {
	var out []AnnotationSpec
	seen := map[string]string{}
	add := func(a AnnotationSpec, from string) error {
		if prev, ok := seen[a.Key]; ok {
			return fmt.Errorf("annotation %s given twice (%s and %s)", a.Key, prev, from)
		}
		seen[a.Key] = from
		out = append(out, a)
		return nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, format, explicit := strings.Cut(item, "=")
		if !explicit {
			preset, ok := presets[item]
			if !ok {
				return nil, fmt.Errorf("%q is neither a preset (%s) nor KEY=FORMAT", item, strings.Join(PresetNames(), ", "))
			}
			n := 0
			for _, a := range preset {
				if slices.Contains(managed, a.Type) {
					if err := add(a, "preset "+item); err != nil {
						return nil, err
					}
					n++
				}
			}
			if n == 0 {
				return nil, fmt.Errorf("preset %s writes %s, which is not managed", item, preset[0].Type)
			}
			continue
		}
		key = strings.TrimSpace(key)
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("%q is not a valid annotation key: %s", key, strings.Join(errs, "; "))
		}
		a, err := parseFormat(strings.TrimSpace(format))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		if !slices.Contains(managed, a.Type) {
			return nil, fmt.Errorf("%s=%s: %s is not managed", key, format, a.Type)
		}
		a.Key = key
		if err := add(a, item); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func parseFormat(s string) (AnnotationSpec, error) {
	var a AnnotationSpec
	rest, ok := strings.CutPrefix(s, "internal-")
	a.Type = resolver.InternalIP
	if !ok {
		rest, ok = strings.CutPrefix(s, "external-")
		a.Type = resolver.ExternalIP
	}
	a.Form = Form(rest)
	if !ok || !slices.Contains(forms, a.Form) {
		var names []string
		for _, f := range forms {
			names = append(names, "internal-"+string(f))
		}
		return a, fmt.Errorf("format %q is not one of %s (or external-…)", s, strings.Join(names, ", "))
	}
	return a, nil
}

// annotationChanges returns the desired value of each key whose value on the Node differs ("" removes
// the key); nil when nothing is to change.
func annotationChanges(current map[string]string, specs []AnnotationSpec, addrs []resolver.Address) map[string]string {
	var out map[string]string
	for _, a := range specs {
		want := a.Value(addrs)
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
func Preview(s resolver.State, specs []AnnotationSpec) ([]corev1.NodeAddress, map[string]string) {
	merged := merge(nil, s.Managed, s.Addresses)
	if len(specs) == 0 {
		return merged, nil
	}
	out := map[string]string{}
	maps.Copy(out, annotationChanges(nil, specs, inStatusOrder(merged, s.Managed, s.Addresses)))
	return merged, out
}
