package soak

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// The oracle. It shares no code with nodeaddr: it reads the kernel with iproute2's JSON output and
// restates the flags' policy as simply as it can (docs/configuration.md, "Selection policy"):
//
//   - a candidate is the source address of the kernel's route toward the type's target;
//   - it must be a global-scope IPv4 address on a non-excluded interface that is not secondary,
//     deprecated (or preferred lifetime 0), tentative, optimistic or DAD-failed;
//   - InternalIP is sticky: the Node's current InternalIP stays while the host still has it as
//     an address the policy accepts, so either it or the route source is right;
//   - an ExternalIP equal to an InternalIP of the Node is dropped (--external-ip-equal-internal=drop).

// kaddr is one address as `ip -j addr` reports it.
type kaddr struct {
	Family     string `json:"family"`
	Local      string `json:"local"`
	Prefixlen  int    `json:"prefixlen"`
	Scope      string `json:"scope"`
	Label      string `json:"label"`
	Secondary  bool   `json:"secondary"`
	Deprecated bool   `json:"deprecated"`
	Tentative  bool   `json:"tentative"`
	Optimistic bool   `json:"optimistic"`
	DADFailed  bool   `json:"dadfailed"`
	Preferred  *int64 `json:"preferred_life_time"`
	Dev        string `json:"-"`
}

// usable restates the policy for one address.
func (a kaddr) usable() bool {
	return a.Family == "inet" && a.Scope == "global" && !a.Secondary && !a.Deprecated && !a.Tentative &&
		!a.Optimistic && !a.DADFailed && (a.Preferred == nil || *a.Preferred != 0) && a.Dev != "lo" &&
		(a.Label == "" || a.Label == a.Dev) && a.Prefixlen < 32
}

// sample is the kernel's state at one moment.
type sample struct {
	At       time.Time
	Addrs    []kaddr
	Internal string // route source toward internalTarget ("" without a route)
	External string
	Err      error
}

// usableSet returns the usable addresses.
func (s sample) usableSet() []string {
	var out []string
	for _, a := range s.Addrs {
		if a.usable() {
			out = append(out, a.Local)
		}
	}
	return out
}

func (s sample) isUsable(ip string) bool { return slices.Contains(s.usableSet(), ip) }

func (s sample) String() string {
	var b strings.Builder
	for _, a := range s.Addrs {
		if a.Family != "inet" || a.Scope != "global" {
			continue
		}
		fmt.Fprintf(&b, "%s/%d@%s", a.Local, a.Prefixlen, a.Dev)
		if a.Secondary {
			b.WriteString("(sec)")
		}
		if a.Deprecated || (a.Preferred != nil && *a.Preferred == 0) {
			b.WriteString("(depr)")
		}
		b.WriteString(" ")
	}
	fmt.Fprintf(&b, "route[int]=%s route[ext]=%s", orNone(s.Internal), orNone(s.External))
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// expectation is the oracle's verdict for one kernel sample and the Node's current addresses.
type expectation struct {
	Internal []string // acceptable InternalIPs (empty: the Node must have none)
	External string   // the ExternalIP ("" : none)
}

// expect computes what the Node must show given the kernel sample s and the Node's current
// InternalIP (for stickiness).
func expect(s sample, nodeInternal string) expectation {
	var e expectation
	if s.Internal != "" && s.isUsable(s.Internal) {
		e.Internal = append(e.Internal, s.Internal)
	}
	if nodeInternal != "" && nodeInternal != s.Internal && s.isUsable(nodeInternal) {
		e.Internal = append(e.Internal, nodeInternal)
	}
	if s.External != "" && s.isUsable(s.External) {
		e.External = s.External
	}
	return e
}

// readKernel samples the namespace's addresses and the two route lookups.
func readKernel(ns string) sample {
	s := sample{At: time.Now()}
	out, err := exec.Command("ip", "-n", ns, "-j", "-4", "addr", "show").Output()
	if err != nil {
		s.Err = fmt.Errorf("ip addr: %v", err)
		return s
	}
	var links []struct {
		Ifname   string  `json:"ifname"`
		AddrInfo []kaddr `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		s.Err = fmt.Errorf("ip addr json: %v", err)
		return s
	}
	for _, l := range links {
		for _, a := range l.AddrInfo {
			a.Dev = l.Ifname
			s.Addrs = append(s.Addrs, a)
		}
	}
	s.Internal = routeSource(ns, internalTarget)
	s.External = routeSource(ns, externalTarget)
	return s
}

// routeSource is the prefsrc of `ip route get target`, "" when there is no route.
func routeSource(ns, target string) string {
	out, err := exec.Command("ip", "-n", ns, "-j", "route", "get", target).Output()
	if err != nil {
		return ""
	}
	var r []struct {
		Prefsrc string `json:"prefsrc"`
	}
	if json.Unmarshal(out, &r) != nil || len(r) == 0 {
		return ""
	}
	return r[0].Prefsrc
}

// kernelTimeline samples the kernel continuously; invariant 2 asks it what the host had when.
type kernelTimeline struct {
	mu      sync.Mutex
	samples []sample
}

func (k *kernelTimeline) add(s sample) {
	if s.Err != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	n := len(k.samples)
	if n > 0 && s.At.Before(k.samples[n-1].At) {
		// Sampled concurrently (the sampler and a fault): keep the timeline in time order.
		i, _ := slices.BinarySearchFunc(k.samples, s.At, func(x sample, t time.Time) int { return x.At.Compare(t) })
		k.samples = slices.Insert(k.samples, i, s)
		return
	}
	// Keep one sample per distinct state, plus its last confirmation.
	if n > 1 && k.samples[n-1].String() == s.String() && k.samples[n-2].String() == s.String() {
		k.samples[n-1] = s
		return
	}
	k.samples = append(k.samples, s)
}

// between returns the samples taken in [from, to], plus the last one before from (the state in
// force at from).
func (k *kernelTimeline) between(from, to time.Time) []sample {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []sample
	for i, s := range k.samples {
		if s.At.Before(from) {
			if i+1 < len(k.samples) && !k.samples[i+1].At.Before(from) {
				out = append(out, s)
			}
			continue
		}
		if s.At.After(to) {
			break
		}
		out = append(out, s)
	}
	return out
}

// prune forgets samples older than before (the audit check is done with them).
func (k *kernelTimeline) prune(before time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	i := 0
	for i < len(k.samples)-1 && k.samples[i+1].At.Before(before) {
		i++
	}
	k.samples = slices.Clone(k.samples[i:])
}

// run samples every period until stop is closed.
func (k *kernelTimeline) run(ns string, period time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		k.add(readKernel(ns))
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}
