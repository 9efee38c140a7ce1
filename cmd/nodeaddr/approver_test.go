package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

// Bad input to `nodeaddr approver` is a usage error (exit 2) naming the flag; --help and --version
// exit 0 without touching a cluster.
func TestApproverUsage(t *testing.T) {
	env := func(string) string { return "" }
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "Usage: nodeaddr approver"},
		{[]string{"--version"}, 0, "nodeaddr "},
		{[]string{"--service-cidr=10.96.0.0/33"}, 2, "--service-cidr: \"10.96.0.0/33\" is not a CIDR"},
		{[]string{"--allowed-ip-prefixes=10.0.0.1"}, 2, "--allowed-ip-prefixes: \"10.0.0.1\" is not a CIDR"},
		{[]string{"--allowed-dns-suffixes=*.example"}, 2, "--allowed-dns-suffixes"},
		{[]string{"--max-sans=0"}, 2, "--max-sans and --max-pending-per-node must be at least 1"},
		{[]string{"--log-level=loud"}, 2, "--log-level: \"loud\""},
		{[]string{"--log-format=xml"}, 2, "--log-format: \"xml\""},
		{[]string{"--no-such-flag"}, 2, "unknown flag: --no-such-flag"},
		{[]string{"extra"}, 2, "unexpected arguments"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"approver"}, tc.args...), env, &out, &errOut)
			if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
				t.Fatalf("exit %d, output %q %q; want exit %d and %q", code, out.String(), errOut.String(), tc.code, tc.want)
			}
		})
	}
}

// The flags reach the policy; the Lease's namespace comes from POD_NAMESPACE when not given.
func TestApproverFlags(t *testing.T) {
	o, err := parseApproverFlags([]string{"--allowed-dns-suffixes=example.internal", "--allowed-ip-prefixes=10.0.0.0/8,fd00::/8",
		"--service-cidr=10.96.0.1/12", "--max-sans=4"}, func(k string) string { return map[string]string{"POD_NAMESPACE": "infra"}[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintln(o.namespace, o.policy.DNSSuffixes, o.policy.IPPrefixes, o.serviceCIDRs, o.policy.MaxSANs, o.policy.MaxPendingPerNode, o.leaderElect)
	if want := "infra [example.internal] [10.0.0.0/8 fd00::/8] [10.96.0.0/12] 4 10 true\n"; got != want {
		t.Fatalf("options %s, want %s", got, want)
	}
}

// --approval-record adds the record to the annotations; the deprecated approval flag means the
// same and says so; naming the record's key in --annotations as well is refused.
func TestApprovalRecordFlag(t *testing.T) {
	for _, flag := range []string{"--approval-record", "--approve-kubelet-serving-csr"} {
		o, err := parseFlags([]string{"--node-name=n", flag}, func(string) string { return "" }, func() (string, error) { return "n", nil }, nil)
		if err != nil {
			t.Fatalf("%s: %v", flag, err)
		}
		if n := len(o.annotations); n != 1 || o.annotations[0].Key != "nodeaddr.io/addresses" {
			t.Errorf("%s: annotations %v", flag, o.annotations)
		}
		if deprecated := strings.Join(o.deprecations, "\n"); (flag == "--approve-kubelet-serving-csr") != strings.Contains(deprecated, "central approver") {
			t.Errorf("%s: deprecations %q", flag, deprecated)
		}
	}
	_, err := parseFlags([]string{"--node-name=n", "--approval-record", "--annotations=nodeaddr.io/addresses=internal-ips"},
		func(string) string { return "" }, func() (string, error) { return "n", nil }, nil)
	if err == nil || !strings.Contains(err.Error(), "which --approval-record writes itself") {
		t.Fatalf("err %v", err)
	}
}
