package resolver

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/nodeaddr/nodeaddr/resolver/explanation"
)

// errNoRoute is a target the kernel has no route to (for explanations; Skip keeps "no route").
var errNoRoute = errors.New("no route to target")

// errAPIServerUnknown is an apiserver target with no address of its family (stage_apiserver.go).
var errAPIServerUnknown = errors.New(apiServerUnknown)

// NoTarget is the reason of a type and family with neither a target nor an interface source
// (docs/configuration.md, "One family's targets").
const NoTarget = "no target of this family: not published; the Node's entry of this type and family is removed"

// Explained is one line of an explanation (--explain): a candidate address of a type and family
// (or none), where it came from, and the rule that chose or dropped it. It is the portable form the
// AddressesUpdated Event carries and kubectl nodeaddr reads; its String is the line --explain prints.
type Explained = explanation.Line

// recorder collects the selection's explanation while selectAddresses runs.
type recorder struct {
	lines []Explained
	// dadFailed are the candidates refused because duplicate address detection failed (State.DADFailed).
	dadFailed []Address
}

func from(tgt Target, link string) string {
	switch {
	case tgt.placeholder():
		return "route to the API server"
	case tgt.APIServer:
		return "route to the API server " + tgt.IP.String()
	}
	if tgt.IP.IsValid() {
		return "route to " + tgt.IP.String()
	}
	return "interface " + link
}

// reject records a candidate the policy refused (src invalid: the route has no source).
func (r *recorder) reject(tgt Target, src netip.Addr, link string, err error) {
	f := FamilyOf(tgt.IP)
	if !tgt.IP.IsValid() {
		f = FamilyOf(src)
	}
	if errors.Is(err, errDADFailed) && src.IsValid() && !slices.ContainsFunc(r.dadFailed, func(a Address) bool { return a.IP == src }) {
		r.dadFailed = append(r.dadFailed, Address{Type: tgt.Type, IP: src, Interface: link})
	}
	reason := "rejected: " + err.Error()
	if errors.Is(err, errNoRoute) || errors.Is(err, errNotLocal) || errors.Is(err, errAPIServerUnknown) {
		reason = err.Error()
	}
	e := Explained{Type: string(tgt.Type), Family: f.String(), From: from(tgt, link), Reason: reason}
	if src.IsValid() {
		e.Address = src.String()
	}
	r.lines = append(r.lines, e)
}

// picked records every accepted candidate of t and f with why pick chose or passed it over.
func (r *recorder) picked(t AddressType, f Family, tgt Target, sourced bool, cands []candidate, won candidate, prev State) {
	if len(cands) == 0 {
		reason := "no accepted candidate: not published"
		if !sourced {
			reason = NoTarget
		}
		r.lines = append(r.lines, Explained{Type: string(t), Family: f.String(), Reason: reason})
		return
	}
	old, hadOld := prev.Get(t, f)
	for _, c := range cands {
		e := Explained{Type: string(t), Family: f.String(), Address: c.la.IP.String(), From: from(Target{}, c.la.Link)}
		switch {
		case c.route:
			e.From = from(tgt, "")
		case c.prev:
			e.From = "previous address"
		}
		switch {
		case c.la.IP == won.la.IP:
			e.Chosen, e.Reason = true, "chosen"
		case c.prio > won.prio:
			e.Reason = fmt.Sprintf("lower CIDR priority than %s", won.la.IP)
		case hadOld && old.IP == won.la.IP:
			e.Reason = fmt.Sprintf("previous address %s kept among equals", won.la.IP)
		case won.route:
			e.Reason = fmt.Sprintf("route source %s preferred among equals", won.la.IP)
		default:
			e.Reason = fmt.Sprintf("%s comes first in kernel order among equals", won.la.IP)
		}
		r.lines = append(r.lines, e)
	}
}

// logExplanation writes the explanation at debug level, one record per line with stable keys.
func logExplanation(log *slog.Logger, lines []Explained) {
	for _, e := range lines {
		log.Debug("explain", "type", e.Type, "family", e.Family, "address", e.Address, "from", e.From,
			"chosen", e.Chosen, "reason", e.Reason)
	}
}

// why is a stage's copy of a state's explanation, which it may change: states share their slices.
type why []Explained

func (s State) why() why { return slices.Clone(why(s.Explanation)) }

// passOver marks the chosen line of type t and family f, if any, as passed over for reason.
func (w why) passOver(t AddressType, f Family, reason string) {
	for i := range w {
		if w[i].Chosen && w[i].Type == string(t) && w[i].Family == f.String() {
			w[i].Chosen, w[i].Reason = false, reason
		}
	}
}

// chose adds the line of an address a stage put in the state.
func (w why) chose(a Address, from, reason string) why {
	return append(w, Explained{Type: string(a.Type), Family: FamilyOf(a.IP).String(), Address: a.IP.String(),
		From: from, Chosen: true, Reason: reason})
}
