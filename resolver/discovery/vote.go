package discovery

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Reply is one server's answer to a Binding request: the mapped address, or why there is none.
type Reply struct {
	Server string
	Addr   netip.Addr
	Err    error
}

// Outcome is the result of a vote across the configured servers.
type Outcome string

// The outcomes of a vote, the result label of nodeaddr_discovery_rounds_total.
const (
	Agreed       Outcome = "agreed"       // a majority of the configured servers gave one address
	Disagreement Outcome = "disagreement" // servers answered with different addresses
	NoMajority   Outcome = "no_majority"  // one address, but from too few servers
	NoAnswer     Outcome = "no_answer"    // no server answered
)

// Outcomes lists every outcome, for metrics (a fresh slice: callers may keep or change it).
func Outcomes() []Outcome { return []Outcome{Agreed, Disagreement, NoMajority, NoAnswer} }

// Verdict is a vote's outcome: the agreed address, or a reason naming what the servers said.
type Verdict struct {
	Outcome Outcome
	Addr    netip.Addr
	Reason  string
}

// Vote keeps an address only when more than half of the configured servers (not of those that
// answered) gave it. Any two servers that answer differently give no answer at all: a
// per-destination NAT mapping or a lying server is a reason to stop, not to out-vote.
func Vote(replies []Reply, configured int) Verdict {
	counts := map[netip.Addr]int{}
	var errs []string
	for _, r := range replies {
		if r.Err != nil || !r.Addr.IsValid() {
			errs = append(errs, fmt.Sprintf("%s: %v", r.Server, r.Err))
			continue
		}
		counts[r.Addr]++
	}
	if len(counts) == 0 {
		return Verdict{Outcome: NoAnswer, Reason: "no server answered (" + strings.Join(errs, "; ") + ")"}
	}
	if len(counts) > 1 {
		return Verdict{Outcome: Disagreement, Reason: "servers disagree: " + describe(replies)}
	}
	var addr netip.Addr
	var n int
	for a, c := range counts { // the only one
		addr, n = a, c
	}
	if n*2 > configured {
		return Verdict{Outcome: Agreed, Addr: addr}
	}
	return Verdict{Outcome: NoMajority, Reason: fmt.Sprintf("%s from %d of %d servers, no majority (%s)",
		addr, n, configured, strings.Join(errs, "; "))}
}

// describe lists server=address pairs in server order, for logs and events.
func describe(replies []Reply) string {
	var parts []string
	for _, r := range replies {
		if r.Err == nil && r.Addr.IsValid() {
			parts = append(parts, r.Server+"="+r.Addr.String())
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
