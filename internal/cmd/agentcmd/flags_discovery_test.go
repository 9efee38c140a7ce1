package agentcmd

import (
	"strings"
	"testing"
	"time"
)

func TestDiscoveryFlags(t *testing.T) {
	o, err := parse([]string{"--node-name=a"}, env())
	if err != nil {
		t.Fatal(err)
	}
	if o.discovery.agentConfig(nil, nil) != nil || o.discovery.interval != 5*time.Minute || o.discovery.staleAfter != time.Hour {
		t.Errorf("defaults: servers %v interval %s stale-after %s; want off, 5m, 1h", o.discovery.servers, o.discovery.interval, o.discovery.staleAfter)
	}
	o, err = parse([]string{"--node-name=a", "--external-ip-discovery=stun:192.0.2.1:3478,stun:[2001:db8::1]:3478,stun:stun.example.net:19302",
		"--external-ip-discovery-stale-after=2h", "--external-ip-discovery-interval=90m"}, env())
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.discovery.agentConfig(nil, nil)
	if cfg == nil {
		t.Fatal("discovery off")
	}
	var got []string
	for _, s := range cfg.Servers {
		got = append(got, s.String())
	}
	if strings.Join(got, " ") != "192.0.2.1:3478 [2001:db8::1]:3478 stun.example.net:19302" || cfg.Interval != 90*time.Minute || cfg.StaleAfter != 2*time.Hour {
		t.Errorf("config: servers %v interval %s stale-after %s", got, cfg.Interval, cfg.StaleAfter)
	}
	// Set but empty, as a Helm chart passes it: off.
	if o, err = parse([]string{"--node-name=a", "--external-ip-discovery="}, env()); err != nil || o.discovery.agentConfig(nil, nil) != nil {
		t.Errorf("empty --external-ip-discovery: %v, enabled %v", err, o != nil && o.discovery.agentConfig(nil, nil) != nil)
	}
}

func TestDiscoveryFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--external-ip-discovery=192.0.2.1:3478"}, `--external-ip-discovery: "192.0.2.1:3478": not stun:HOST:PORT`},
		{[]string{"--external-ip-discovery=stun:192.0.2.1"}, "not stun:HOST:PORT"},
		{[]string{"--external-ip-discovery=stuns:stun.example.net:5349"}, "scheme stuns is not supported"},
		{[]string{"--external-ip-discovery=stun:a_b:3478"}, `host "a_b" is neither an IP address nor a DNS name`},
		{[]string{"--external-ip-discovery=stun:192.0.2.1:99999"}, `port "99999"`},
		{[]string{"--external-ip-discovery-interval=0s"}, "--external-ip-discovery-interval: 0s is not positive"},
		{[]string{"--external-ip-discovery-interval=soon"}, `--external-ip-discovery-interval: invalid value "soon"`},
		{[]string{"--external-ip-discovery-stale-after=-1h"}, "--external-ip-discovery-stale-after: -1h0m0s is not positive"},
		{[]string{"--external-ip-discovery-interval=2h"}, "--external-ip-discovery-stale-after (1h0m0s) is shorter than --external-ip-discovery-interval (2h0m0s)"},
		{[]string{"--external-ip-discovery-stale-after=1m", "--external-ip-discovery-interval=2m"}, "is shorter than"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runArgs(t, env(), append([]string{"--node-name=a"}, tc.args...)...)
			if code != 2 || stdout != "" {
				t.Errorf("exit %d stdout %q, want 2 and nothing", code, stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q, want one line containing %q", stderr, tc.want)
			}
		})
	}
	// The order of the pair does not matter.
	if _, err := parse([]string{"--node-name=a", "--external-ip-discovery-interval=2h", "--external-ip-discovery-stale-after=3h"}, env()); err != nil {
		t.Errorf("interval 2h then stale-after 3h: %v", err)
	}
}
