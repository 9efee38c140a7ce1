package agentcmd

import (
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// The agent's assembly from the flags: the Node's pod CIDRs stay excluded unless
// --default-exclusions=false, and the managed types and targets live in the policy alone.
func TestConfigFromFlags(t *testing.T) {
	for _, tc := range []struct {
		args          []string
		allowPodCIDRs bool
	}{
		{[]string{"--node-name=n"}, false},
		{[]string{"--node-name=n", "--default-exclusions=false"}, true},
	} {
		o, err := parse(tc.args, env())
		if err != nil {
			t.Fatal(err)
		}
		cfg := (&command{opts: o, log: slog.New(slog.DiscardHandler)}).config(prometheus.NewRegistry())
		if cfg.AllowPodCIDRs != tc.allowPodCIDRs {
			t.Errorf("%v: AllowPodCIDRs = %v, want %v", tc.args, cfg.AllowPodCIDRs, tc.allowPodCIDRs)
		}
		p := cfg.Loop.Policy
		if len(p.Managed) != 2 || p.Managed[0] != resolver.InternalIP || p.Managed[1] != resolver.ExternalIP || len(p.Targets) != 6 {
			t.Errorf("%v: policy manages %v with targets %v, want both types and the six default targets", tc.args, p.Managed, p.Targets)
		}
	}
}
