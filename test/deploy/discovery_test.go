package deploy

import (
	"slices"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// External-address discovery is off in the shipped chart (an empty server list), is rendered from
// config.externalIPDiscovery* when set, and the schema refuses a server list the binary would.
func TestHelmExternalIPDiscovery(t *testing.T) {
	harness.RequireE2E(t)
	if args := harness.ArgsWith(t); !slices.Contains(args, "--external-ip-discovery=") {
		t.Errorf("default render: args %q, want --external-ip-discovery= (off)", args)
	}
	args := harness.ArgsWith(t, `config.externalIPDiscovery=stun:192.0.2.1:3478\,stun:[2001:db8::1]:3478`,
		"config.externalIPDiscoveryInterval=2m", "config.externalIPDiscoveryStaleAfter=30m")
	for _, want := range []string{"--external-ip-discovery=stun:192.0.2.1:3478,stun:[2001:db8::1]:3478",
		"--external-ip-discovery-interval=2m", "--external-ip-discovery-stale-after=30m"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	for _, bad := range []string{"config.externalIPDiscovery=192.0.2.1:3478", "config.externalIPDiscovery=stuns:stun.example.net:5349",
		"config.externalIPDiscoveryInterval=0", "config.externalIPDiscoveryStaleAfter=soon"} {
		if _, err := harness.HelmTemplateErr(t, "--set", bad); err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
			t.Errorf("--set %s: %v, want a schema refusal", bad, err)
		}
	}
}
