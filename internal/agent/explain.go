package agent

// --explain: the dry run prints, before each JSON line, why every address was chosen or dropped
// (docs/configuration.md, "Why this address? --explain"). The resolver explains its selection;
// the rules applied after it (the ExternalIP equal to an InternalIP, STUN, the loop's hold-down)
// are added here by comparing the selection with the state and the preview.

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// explainer re-resolves with the explaining recorder and completes the explanation of a state.
type explainer struct {
	kernel    resolver.Kernel
	policy    resolver.Policy
	discovery bool // --external-ip-discovery: an ExternalIP not selected came from STUN
	json      bool // -o json
}

// explain returns the lines for s (published as addrs, after the merge rules). prev is the state
// printed before s, for stickiness, as the loop resolved it.
func (e *explainer) explain(s resolver.State, prev *resolver.State, keepEqual bool) []resolver.Explained {
	p := resolver.State{Managed: e.policy.Managed}
	if prev != nil {
		p = *prev
	}
	_, _, lines, err := resolver.ResolvePolicyExplained(e.kernel, e.policy, p)
	if err != nil {
		return []resolver.Explained{{Reason: fmt.Sprintf("no explanation: %v", err)}}
	}
	published, _ := publisher.Preview(s, nil, keepEqual)
	for _, a := range s.Addresses {
		fam := resolver.FamilyOf(a.IP)
		if !slices.ContainsFunc(lines, func(l resolver.Explained) bool {
			return l.Chosen && l.Type == a.Type && l.Address == a.IP.String()
		}) {
			for i := range lines { // the selection's choice of this type and family was replaced
				if lines[i].Chosen && lines[i].Type == a.Type && lines[i].Family == fam.String() {
					lines[i].Chosen, lines[i].Reason = false, "replaced by "+a.IP.String()
				}
			}
			l := resolver.Explained{Type: a.Type, Family: fam.String(), Address: a.IP.String(), Chosen: true,
				From: "previous address", Reason: "held during removal grace (the loop's hold-down)"}
			if a.Type == resolver.ExternalIP && e.discovery {
				l.From, l.Reason = "STUN discovery", "chosen: the mapped address replaces the route source"
			}
			lines = append(lines, l)
		}
		if !slices.ContainsFunc(published, func(n corev1.NodeAddress) bool {
			return string(n.Type) == string(a.Type) && n.Address == a.IP.String()
		}) {
			for i := range lines {
				if lines[i].Chosen && lines[i].Type == a.Type && lines[i].Address == a.IP.String() {
					lines[i].Chosen = false
					lines[i].Reason = "dropped: equals an InternalIP (--external-ip-equal-internal=drop)"
				}
			}
		}
	}
	for i, l := range lines { // the kernel changed between the two resolutions
		if l.Chosen && !slices.ContainsFunc(s.Addresses, func(a resolver.Address) bool {
			return a.Type == l.Type && a.IP.String() == l.Address
		}) {
			lines[i].Chosen, lines[i].Reason = false, "chosen now, but not in the state printed (resolved again since)"
		}
	}
	return lines
}

// write prints lines as text, one per line, or as one JSON object {"explain":[...]}.
func (e *explainer) write(w io.Writer, lines []resolver.Explained) {
	if e.json {
		b, _ := json.Marshal(struct {
			Explain []resolver.Explained `json:"explain"`
		}{lines})
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
