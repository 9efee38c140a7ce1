package vocab

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// RecordAnnotation is the approval record an agent started with --approval-record keeps on its own
// Node: the comma-separated IPs of every managed type it wrote into status.addresses, in status
// order. The base admission policy lets an agent write only its own Node, and the
// kubelet-serving-csr component's policy keeps kubelets from writing this key, so an IP in it was
// published by that Node's agent: the approver approves from it (internal/csrapproval/rules).
const RecordAnnotation = "nodeaddr.io/addresses"

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

// AnnotationSpec is an annotation the agent writes: the addresses of Type (every managed type when
// empty) as Form under Key.
type AnnotationSpec struct {
	Key  string
	Type corev1.NodeAddressType
	Form Form
}

// RecordSpec is the AnnotationSpec of the approval record.
func RecordSpec() AnnotationSpec { return AnnotationSpec{Key: RecordAnnotation, Form: FormIPs} }

// String is the spec as --annotations spells it: KEY=FORMAT.
func (a AnnotationSpec) String() string { return a.Key + "=" + formatName(a.Type, a.Form) }

func formatName(t corev1.NodeAddressType, f Form) string {
	switch t {
	case "":
		return string(f)
	case corev1.NodeInternalIP:
		return "internal-" + string(f)
	}
	return "external-" + string(f)
}

// presets are the annotation sets of well-known consumers, by the name --annotations takes.
var presets = map[string][]AnnotationSpec{
	// nodeaddr's own keys, one per type and family.
	"nodeaddr": {
		{"nodeaddr.io/internal-ipv4", corev1.NodeInternalIP, FormIPv4},
		{"nodeaddr.io/internal-ipv6", corev1.NodeInternalIP, FormIPv6},
		{"nodeaddr.io/external-ipv4", corev1.NodeExternalIP, FormIPv4},
		{"nodeaddr.io/external-ipv6", corev1.NodeExternalIP, FormIPv6},
	},
	// k3s records its --node-ip and --node-external-ip as comma-separated lists.
	"k3s": {
		{"k3s.io/internal-ip", corev1.NodeInternalIP, FormIPs},
		{"k3s.io/external-ip", corev1.NodeExternalIP, FormIPs},
	},
	// flannel's public address (the one other nodes' tunnels reach), as k3s sets it.
	"flannel": {
		{"flannel.alpha.coreos.com/public-ip-overwrite", corev1.NodeExternalIP, FormIPv4},
		{"flannel.alpha.coreos.com/public-ipv6-overwrite", corev1.NodeExternalIP, FormIPv6},
	},
	// Calico's node addresses (Kubernetes datastore), in CIDR form.
	"calico": {
		{"projectcalico.org/IPv4Address", corev1.NodeInternalIP, FormIPv4CIDR},
		{"projectcalico.org/IPv6Address", corev1.NodeInternalIP, FormIPv6CIDR},
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
// items (FORMAT: internal-|external- then a Form). managed lists the managed address types, spelt
// as in status.addresses (resolver.AddressType or corev1.NodeAddressType). A preset contributes the
// keys of the managed types; an item of an unmanaged type, a preset with no managed key and a key
// given twice are errors.
func ParseAnnotations[T ~string](s string, managed []T) ([]AnnotationSpec, error) {
	isManaged := func(t corev1.NodeAddressType) bool { return slices.Contains(managed, T(t)) }
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
				if isManaged(a.Type) {
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
		if !isManaged(a.Type) {
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
	a.Type = corev1.NodeInternalIP
	if !ok {
		rest, ok = strings.CutPrefix(s, "external-")
		a.Type = corev1.NodeExternalIP
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
