package rules

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"
)

// PolicyFlags defines the approver's policy flags on fs (`nodeaddr approver`); after fs.Parse, the
// returned function validates them into the Policy and the --service-cidr prefixes. The approver
// and `kubectl nodeaddr stale`, which reads them from the approver's Deployment, parse them alike.
func PolicyFlags(fs *pflag.FlagSet) func() (Policy, []netip.Prefix, error) {
	var p Policy
	var cidrs, prefixes []string
	fs.StringVar(&p.ClusterDomain, "cluster-domain", "cluster.local", "the cluster's DNS domain: no DNS SAN may be under it")
	fs.StringSliceVar(&cidrs, "service-cidr", nil, "the Service network's CIDRs, added to the cluster's ServiceCIDR objects and the kubernetes Service's ClusterIPs (for API servers without ServiceCIDR objects)")
	fs.StringSliceVar(&p.DNSSuffixes, "allowed-dns-suffixes", nil, "besides the node's name, allow the DNS SAN <node name>.<suffix> for each suffix")
	fs.StringSliceVar(&prefixes, "allowed-ip-prefixes", nil, "when set, every IP SAN must lie inside one of these CIDRs (a second factor beside the agent's record)")
	fs.IntVar(&p.MaxSANs, "max-sans", 10, "most DNS and IP SANs in one CSR")
	fs.IntVar(&p.MaxPendingPerNode, "max-pending-per-node", 10, "most pending CSRs of one node decided per pass, newest first")
	return func() (Policy, []netip.Prefix, error) {
		var service []netip.Prefix
		for _, f := range []struct {
			name string
			in   []string
			out  *[]netip.Prefix
		}{{"--service-cidr", cidrs, &service}, {"--allowed-ip-prefixes", prefixes, &p.IPPrefixes}} {
			for _, c := range f.in {
				pfx, err := netip.ParsePrefix(strings.TrimSpace(c))
				if err != nil {
					return Policy{}, nil, fmt.Errorf("%s: %q is not a CIDR", f.name, c)
				}
				*f.out = append(*f.out, pfx.Masked())
			}
		}
		for _, s := range p.DNSSuffixes {
			if s = strings.Trim(s, "."); s == "" || strings.Contains(s, "*") {
				return Policy{}, nil, fmt.Errorf("--allowed-dns-suffixes: %q is not a DNS suffix", s)
			}
		}
		if p.MaxSANs < 1 || p.MaxPendingPerNode < 1 {
			return Policy{}, nil, errors.New("--max-sans and --max-pending-per-node must be at least 1")
		}
		return p, service, nil
	}
}

// ApproverPolicy reads the policy from the arguments of an approver's container (`approver` and
// its flags; flags other than the policy's are skipped).
func ApproverPolicy(args []string) (Policy, []netip.Prefix, error) {
	fs := pflag.NewFlagSet("approver", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.SetOutput(nil)
	parse := PolicyFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Policy{}, nil, err
	}
	return parse()
}
