package conflicts

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

func TestDecide(t *testing.T) {
	var (
		t0     = time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
		window = 30 * time.Second
		ip     = netip.MustParseAddr("10.0.2.15")
		ip6    = netip.MustParseAddr("2001:db8::15")
		old    = time.Time{} // listed before the detector started
	)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	claim := func(node string, since time.Time) Claim { return Claim{Node: node, Since: since} }
	stale := func(node string, since time.Time) Claim { return Claim{Node: node, Since: since, NotReady: true} }
	first := func(node string, since time.Time) Claim { return Claim{Node: node, Since: since, First: true} }
	for _, tc := range []struct {
		name   string
		shared []Shared
		now    time.Time
		want   string // conflicts as "addr:node,node[!notready]" joined by " "
		check  time.Time
	}{
		{"no shared address", nil, at(0), "", time.Time{}},
		{"shared before the detector started: a conflict at once",
			[]Shared{{ip, claim("a", old), []Claim{claim("b", old)}}}, at(0), "10.0.2.15:b", time.Time{}},
		{"two claims begun together, none first: a move until the window ends",
			[]Shared{{ip, claim("a", at(0)), []Claim{claim("b", at(0))}}}, at(29 * time.Second), "", at(30 * time.Second)},
		{"two claims begun together, none first: a conflict once the window ends",
			[]Shared{{ip, claim("a", at(0)), []Claim{claim("b", at(0))}}}, at(30 * time.Second), "10.0.2.15:b", time.Time{}},
		{"a lease handed to b while a still lists it: a move inside the window",
			[]Shared{{ip, claim("b", at(0)), []Claim{claim("a", old)}}}, at(time.Second), "", at(30 * time.Second)},
		{"a lease handed to b while a, Ready, still lists it: b is flagged past the window, naming a",
			[]Shared{{ip, claim("b", at(0)), []Claim{claim("a", old)}}}, at(30 * time.Second), "10.0.2.15:a", time.Time{}},
		{"a Ready incumbent, listed before the detector started, is not flagged nor rechecked",
			[]Shared{{ip, claim("a", old), []Claim{claim("b", at(0))}}}, at(time.Second), "", time.Time{}},
		{"a Ready incumbent is not flagged past the window either",
			[]Shared{{ip, claim("a", old), []Claim{claim("b", at(0))}}}, at(time.Hour), "", time.Time{}},
		{"an incumbent seen by the detector, older by more than the window: not flagged",
			[]Shared{{ip, claim("a", at(0)), []Claim{claim("b", at(31*time.Second))}}}, at(time.Hour), "", time.Time{}},
		{"the newcomer of that pair is flagged",
			[]Shared{{ip, claim("b", at(31*time.Second)), []Claim{claim("a", at(0))}}}, at(time.Hour), "10.0.2.15:a", time.Time{}},
		{"claims exactly the window apart: both flagged",
			[]Shared{{ip, claim("a", at(0)), []Claim{claim("b", at(30*time.Second))}}}, at(time.Hour), "10.0.2.15:b", time.Time{}},
		{"claims within the window of each other: both flagged",
			[]Shared{{ip, claim("a", at(0)), []Claim{claim("b", at(20*time.Second))}}}, at(time.Hour), "10.0.2.15:b", time.Time{}},
		{"a NotReady incumbent is flagged as before",
			[]Shared{{ip, stale("a", old), []Claim{claim("b", at(0))}}}, at(time.Hour), "10.0.2.15:b", time.Time{}},
		{"the newer claim decides: an old holder and a new one",
			[]Shared{{ip, claim("b", at(10*time.Second)), []Claim{claim("a", old)}}}, at(39 * time.Second), "", at(40 * time.Second)},
		{"a third node inside the window neither clears nor delays the first two",
			[]Shared{{ip, claim("b", old), []Claim{claim("a", old), claim("c", at(0))}}, {ip6, claim("c", at(0)), []Claim{claim("d", at(0))}}},
			at(time.Second), "10.0.2.15:a", at(30 * time.Second)},
		{"the earliest recheck of several pending pairs",
			[]Shared{{ip, claim("a", at(0)), []Claim{claim("b", at(5*time.Second))}}, {ip6, claim("a", at(0)), []Claim{claim("c", at(2*time.Second))}}},
			at(3 * time.Second), "", at(32 * time.Second)},
		{"several addresses and nodes, sorted",
			[]Shared{{ip6, claim("a", old), []Claim{claim("d", old)}}, {ip, claim("a", old), []Claim{claim("c", old), claim("b", old)}}},
			at(0), "10.0.2.15:b,c 2001:db8::15:d", time.Time{}},
		{"a NotReady node still listing the address: a conflict, named as NotReady",
			[]Shared{{ip, claim("new", at(0)), []Claim{stale("old", old)}}}, at(time.Minute), "10.0.2.15:old!old", time.Time{}},
		{"the node itself in the index is no other",
			[]Shared{{ip, claim("a", old), []Claim{claim("a", old)}}}, at(0), "", time.Time{}},
		{"a Node joining with the address a Ready old Node lists: flagged at once, naming it",
			[]Shared{{ip, first("b", at(0)), []Claim{claim("a", old)}}}, at(0), "10.0.2.15:a", time.Time{}},
		{"the Ready old Node, incumbent of a joining Node: not flagged nor rechecked",
			[]Shared{{ip, claim("a", old), []Claim{first("b", at(0))}}}, at(0), "", time.Time{}},
		{"a Node joining with the address a Node renumbered onto long before lists: flagged at once",
			[]Shared{{ip, first("b", at(time.Minute)), []Claim{claim("a", at(0))}}}, at(time.Minute), "10.0.2.15:a", time.Time{}},
		{"a NotReady old Node and a Node joining with its address: both at once",
			[]Shared{{ip, stale("a", old), []Claim{first("b", at(0))}}}, at(0), "10.0.2.15:b", time.Time{}},
		{"two clones joining within the window of each other: the first one flagged at once",
			[]Shared{{ip, first("a", at(0)), []Claim{first("b", at(10*time.Second))}}}, at(10 * time.Second), "10.0.2.15:b", time.Time{}},
		{"two clones joining within the window of each other: the second one flagged at once",
			[]Shared{{ip, first("b", at(10*time.Second)), []Claim{first("a", at(0))}}}, at(10 * time.Second), "10.0.2.15:a", time.Time{}},
		{"two clones joining at the same instant: both at once",
			[]Shared{{ip, first("a", at(0)), []Claim{first("b", at(0))}}}, at(0), "10.0.2.15:b", time.Time{}},
		{"a renumbering onto the address of a Node that joined just before: the window applies",
			[]Shared{{ip, claim("b", at(10*time.Second)), []Claim{first("a", at(0))}}}, at(11 * time.Second), "", at(40 * time.Second)},
		{"a renumbering and a join at the same instant: the window applies (the renumbering may be a move)",
			[]Shared{{ip, first("b", at(0)), []Claim{claim("a", at(0))}}}, at(time.Second), "", at(30 * time.Second)},
		{"a renumbering still a move inside the window, whatever the other claim",
			[]Shared{{ip, claim("b", at(0)), []Claim{claim("a", old)}}, {ip6, claim("b", at(0)), []Claim{first("c", at(-time.Second))}}},
			at(time.Second), "", at(30 * time.Second)},
		{"a join flagged at once beside a renumbering still inside its window",
			[]Shared{{ip, first("b", at(0)), []Claim{claim("a", old)}}, {ip6, first("b", at(0)), []Claim{claim("c", at(0))}}},
			at(time.Second), "10.0.2.15:a", at(30 * time.Second)},
		{"a zero window flags at once",
			[]Shared{{ip, claim("a", at(0)), []Claim{claim("b", at(0))}}}, at(0), "10.0.2.15:b", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := window
			if strings.HasPrefix(tc.name, "a zero window") {
				w = 0
			}
			v := Decide(tc.shared, tc.now, w)
			var got []string
			for _, c := range v.Conflicts {
				s := fmt.Sprintf("%s:%s", c.Address, strings.Join(c.Nodes, ","))
				if len(c.NotReady) > 0 {
					s += "!" + strings.Join(c.NotReady, ",")
				}
				got = append(got, s)
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("conflicts %q, want %q", g, tc.want)
			}
			if !v.RecheckAt.Equal(tc.check) {
				t.Errorf("recheck at %v, want %v", v.RecheckAt, tc.check)
			}
		})
	}
}

func TestCondition(t *testing.T) {
	ip, ip2 := netip.MustParseAddr("10.0.2.15"), netip.MustParseAddr("192.0.2.7")
	for _, tc := range []struct {
		name         string
		v            Verdict
		selfNotReady bool
		status       corev1.ConditionStatus
		reason, msg  string
	}{
		{"none", Verdict{}, false, corev1.ConditionFalse, vocab.ConflictReasonNone, "No other Node lists an address of this Node"},
		{"another Ready node", Verdict{Conflicts: []Conflict{{Address: ip, Nodes: []string{"b"}}}}, false,
			corev1.ConditionTrue, vocab.ConflictReasonAnotherNode, "10.0.2.15 is also listed by Node b"},
		{"only a NotReady node: the stale one is to fix", Verdict{Conflicts: []Conflict{{Address: ip, Nodes: []string{"old"}, NotReady: []string{"old"}}}}, false,
			corev1.ConditionTrue, vocab.ConflictReasonNotReadyNode, "10.0.2.15 is also listed by Node old (NotReady)"},
		{"the NotReady node's own condition", Verdict{Conflicts: []Conflict{{Address: ip, Nodes: []string{"new"}}}}, true,
			corev1.ConditionTrue, vocab.ConflictReasonAnotherNode, "10.0.2.15 is also listed by Node new"},
		{"NotReady on one address, Ready on another", Verdict{Conflicts: []Conflict{
			{Address: ip, Nodes: []string{"old"}, NotReady: []string{"old"}}, {Address: ip2, Nodes: []string{"b", "c"}}}}, false,
			corev1.ConditionTrue, vocab.ConflictReasonAnotherNode, "10.0.2.15 is also listed by Node old (NotReady); 192.0.2.7 is also listed by Node b, c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, r, m := Condition(tc.v, tc.selfNotReady)
			if s != tc.status || r != tc.reason || m != tc.msg {
				t.Errorf("got %s %s %q, want %s %s %q", s, r, m, tc.status, tc.reason, tc.msg)
			}
		})
	}
	var many []string
	for i := range 200 {
		many = append(many, fmt.Sprintf("node-%03d", i))
	}
	_, _, m := Condition(Verdict{Conflicts: []Conflict{{Address: ip, Nodes: many}}}, false)
	if len(m) > messageLimit || !strings.HasSuffix(m, "...") {
		t.Errorf("message of %d bytes, want at most %d ending in ...", len(m), messageLimit)
	}
}

func TestPlan(t *testing.T) {
	conflict := Written{corev1.ConditionTrue, vocab.ConflictReasonAnotherNode, "10.0.2.15 is also listed by Node b"}
	clear := Written{corev1.ConditionFalse, vocab.ConflictReasonNone, "No other Node lists an address of this Node"}
	for _, tc := range []struct {
		name    string
		current *Written
		want    Written
		write   bool
	}{
		{"no condition, no conflict: no write", nil, clear, false},
		{"no condition, a conflict: write", nil, conflict, true},
		{"same conflict: no write", &conflict, conflict, false},
		{"another Node joins: write", &conflict, Written{corev1.ConditionTrue, vocab.ConflictReasonAnotherNode, "10.0.2.15 is also listed by Node b, c"}, true},
		{"conflict ends: write", &conflict, clear, true},
		{"cleared already: no write", &clear, clear, false},
	} {
		if got := Plan(tc.current, tc.want); got != tc.write {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.write)
		}
	}
}

func TestNotReady(t *testing.T) {
	node := func(conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: conds}}
	}
	for _, tc := range []struct {
		name string
		n    *corev1.Node
		want bool
	}{
		{"no Ready condition (no kubelet yet)", node(), false},
		{"Ready", node(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}), false},
		{"NotReady", node(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse}), true},
		{"Unknown (kubelet gone)", node(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}), true},
	} {
		if got := NotReady(tc.n); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
