package rules

import (
	"net/netip"
	"reflect"
	"testing"
)

// TestApproverPolicy: the policy read from an approver container's args, as `kubectl nodeaddr
// stale` reads it, is the one the approver parses; other flags, with or without a value, are skipped.
func TestApproverPolicy(t *testing.T) {
	def := Policy{ClusterDomain: "cluster.local", MaxSANs: 10, MaxPendingPerNode: 10}
	for _, tc := range []struct {
		args    []string
		want    Policy
		service []netip.Prefix
		err     string
	}{
		{args: []string{"--leader-elect=true", "--leader-election-id", "nodeaddr-approver", "--bind-address=:9813"}, want: def},
		{args: []string{"--log-format", "json", "--allowed-ip-prefixes=10.0.0.7/8, fd00::/64", "--service-cidr", "10.96.0.0/12",
			"--allowed-dns-suffixes=nodes.example.internal", "--max-sans=4", "--cluster-domain=corp.example"},
			want: Policy{ClusterDomain: "corp.example", DNSSuffixes: []string{"nodes.example.internal"}, MaxSANs: 4, MaxPendingPerNode: 10,
				IPPrefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/64")}},
			service: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}},
		{args: []string{"--service-cidr=10.96.0.0"}, err: `--service-cidr: "10.96.0.0" is not a CIDR`},
		{args: []string{"--allowed-dns-suffixes=*.example"}, err: `--allowed-dns-suffixes: "*.example" is not a DNS suffix`},
		{args: []string{"--max-pending-per-node=0"}, err: "--max-sans and --max-pending-per-node must be at least 1"},
		{args: []string{"--max-sans=many"}, err: `invalid argument "many" for "--max-sans" flag: strconv.ParseInt: parsing "many": invalid syntax`},
	} {
		p, service, err := ApproverPolicy(tc.args)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(p, tc.want) || !reflect.DeepEqual(service, tc.service) {
			t.Errorf("%q: %+v %v %v, want %+v %v", tc.args, p, service, err, tc.want, tc.service)
		}
	}
}
