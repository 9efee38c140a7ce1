package admission

import (
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The policy's IP syntax (its variables ipv4Syntax and ipv6Syntax, RE2 as CEL's matches() runs them)
// accepts exactly what netip.ParseAddr accepts without a zone, over many more inputs than the API
// server table: random strings of address-like pieces and every group count around an ellipsis.
func TestPolicyIPSyntaxMatchesNetip(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(harness.RepoDir(), "deploy", "admission-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]*regexp.Regexp{}
	for _, o := range objs {
		p, ok := o.(*admissionv1.ValidatingAdmissionPolicy)
		if !ok || p.Name != OwnNode {
			continue
		}
		for _, v := range p.Spec.Variables {
			if v.Name == "ipv4Syntax" || v.Name == "ipv6Syntax" {
				res[v.Name] = regexp.MustCompile(strings.Trim(strings.TrimSpace(v.Expression), "'"))
			}
		}
	}
	if len(res) != 2 {
		t.Fatalf("policy %s lacks the variables ipv4Syntax and ipv6Syntax: %v", OwnNode, res)
	}
	pieces := []string{"0", "1", "00", "0000", "ffff", "FFFF", "a", "12345", "255", "256", "01", ":", "::", ".", "1.2.3.4",
		"0.0.0.0", "fe80", "%", "g", " "}
	r := rand.New(rand.NewPCG(31, 1))
	inputs := append(slices.Clone(NodeIPInputs), GeneratedNodeIPs()...)
	for range 300000 {
		var b strings.Builder
		for j := r.IntN(14); j >= 0; j-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		inputs = append(inputs, b.String())
	}
	valid, wrong := 0, 0
	for _, s := range inputs {
		ip, err := netip.ParseAddr(s)
		want := err == nil && ip.Zone() == ""
		if want {
			valid++
		}
		if got := res["ipv4Syntax"].MatchString(s) || res["ipv6Syntax"].MatchString(s); got != want {
			if wrong++; wrong <= 20 {
				t.Errorf("%q: netip accepts it: %v, the policy's syntax: %v", s, want, got)
			}
		}
	}
	t.Logf("%d inputs, %d valid addresses, %d disagreements", len(inputs), valid, wrong)
}

// Every case of the table has a name unique in its group (a subtest name), a sender and a write.
func TestTableWellFormed(t *testing.T) {
	groups := map[string]bool{}
	for _, g := range Table {
		if groups[g.Name] {
			t.Errorf("group %q twice", g.Name)
		}
		groups[g.Name] = true
		names := map[string]bool{}
		for _, c := range g.Cases {
			if names[c.Name] {
				t.Errorf("%s: case %q twice", g.Name, c.Name)
			}
			names[c.Name] = true
			if c.As == "" || c.Req.do == nil {
				t.Errorf("%s/%s: no sender or no write", g.Name, c.Name)
			}
		}
	}
	t.Logf("%d groups, %d cases", len(Table), Count(Table))
}
