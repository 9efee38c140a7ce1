package agentcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/resolver"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func host(name string) func() (string, error) {
	return func() (string, error) { return name, nil }
}

func noHost() (string, error) { return "", errors.New("uname failed") }

func parse(args []string, getenv func(string) string) (*options, error) {
	return parseFlags(args, getenv, host("Worker-1.Example"), &bytes.Buffer{})
}

func TestParseFlagsDefaults(t *testing.T) {
	o, err := parse([]string{"--node-name=node-a"}, env())
	if err != nil {
		t.Fatal(err)
	}
	wantInternal := []resolver.Target{ // the apiserver target first (one placeholder per family), then the old default
		{Type: resolver.InternalIP, IP: netip.IPv4Unspecified(), APIServer: true},
		{Type: resolver.InternalIP, IP: netip.IPv6Unspecified(), APIServer: true},
		{Type: resolver.InternalIP, IP: netip.MustParseAddr("8.8.8.8")},
		{Type: resolver.InternalIP, IP: netip.MustParseAddr("2001:4860:4860::8888")},
	}
	wantExternal := []resolver.Target{
		{Type: resolver.ExternalIP, IP: netip.MustParseAddr("8.8.8.8")},
		{Type: resolver.ExternalIP, IP: netip.MustParseAddr("2001:4860:4860::8888")},
	}
	switch {
	case o.nodeName != "node-a", o.Kubeconfig != "", !slices.Equal(o.internalTargets, wantInternal), !slices.Equal(o.externalTargets, wantExternal):
		t.Errorf("node %q kubeconfig %q targets %v %v", o.nodeName, o.Kubeconfig, o.internalTargets, o.externalTargets)
	case o.debounce != 10*time.Millisecond, o.linkDebounce != 100*time.Millisecond, o.debounceMaxDelay != time.Second, o.removalGrace != 5*time.Second,
		o.resyncInterval != time.Minute, o.timeout != 30*time.Second:
		t.Errorf("durations %v %v %v %v %v", o.debounce, o.debounceMaxDelay, o.removalGrace, o.resyncInterval, o.timeout)
	case o.publishRate != 1, o.publishBurst != 3, !o.removeTaint, o.runOnce, o.dryRun, o.Version:
		t.Errorf("rate %v burst %v removeTaint %v runOnce %v dryRun %v version %v",
			o.publishRate, o.publishBurst, o.removeTaint, o.runOnce, o.dryRun, o.Version)
	case o.metricsAddr != ":9810", o.probeAddr != "127.0.0.1:9811", o.LogLevel != slog.LevelInfo, o.LogFormat != "text",
		o.netlinkRcvBuf != 4<<20, o.deprecations != nil:
		t.Errorf("metrics %q probe %q level %v format %q rcvbuf %d deprecations %v",
			o.metricsAddr, o.probeAddr, o.LogLevel, o.LogFormat, o.netlinkRcvBuf, o.deprecations)
	}
	if got := o.managed(); !slices.Equal(got, []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP}) {
		t.Errorf("managed = %v, want [InternalIP ExternalIP]", got)
	}
	if p := o.policy(); !p.Types[resolver.InternalIP].Sticky || p.Types[resolver.ExternalIP].Sticky || o.keepExternalEqualInternal {
		t.Errorf("InternalIP sticky %v, ExternalIP sticky %v, keep ExternalIP equal to InternalIP %v; want true, false, false",
			p.Types[resolver.InternalIP].Sticky, p.Types[resolver.ExternalIP].Sticky, o.keepExternalEqualInternal)
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		env   func(string) string
		check func(*options) bool
		want  string // the field values check looked at, for the failure message
	}{
		{"NODE_NAME", nil, env("NODE_NAME", "node-env"),
			func(o *options) bool { return o.nodeName == "node-env" }, "node-env"},
		{"--node-name beats NODE_NAME", []string{"--node-name", "node-flag"}, env("NODE_NAME", "node-env"),
			func(o *options) bool { return o.nodeName == "node-flag" }, "node-flag"},
		{"node name trimmed", []string{"--node-name= node-a "}, env(),
			func(o *options) bool { return o.nodeName == "node-a" }, "node-a"},
		{"--dry-run uses the hostname, lowercased", []string{"--dry-run"}, env(),
			func(o *options) bool { return o.nodeName == "worker-1.example" && o.dryRun }, "worker-1.example"},
		{"--dry-run keeps an explicit name", []string{"--dry-run", "--node-name=Node-A"}, env(),
			func(o *options) bool { return o.nodeName == "Node-A" }, "Node-A"},
		{"KUBECONFIG", []string{"--node-name=a"}, env("KUBECONFIG", "/etc/k/a:/etc/k/b"),
			func(o *options) bool { return o.Kubeconfig == "/etc/k/a:/etc/k/b" }, "/etc/k/a:/etc/k/b"},
		{"--kubeconfig beats KUBECONFIG", []string{"--node-name=a", "--kubeconfig=/flag"}, env("KUBECONFIG", "/env"),
			func(o *options) bool { return o.Kubeconfig == "/flag" }, "/flag"},
		{"--reconcile-interval alias", []string{"--node-name=a", "--reconcile-interval=30s"}, env(),
			func(o *options) bool {
				return o.resyncInterval == 30*time.Second &&
					slices.Equal(o.deprecations, []string{"--reconcile-interval is deprecated, use --resync-interval"})
			}, "30s and one deprecation"},
		{"--resync-interval 0 disables", []string{"--node-name=a", "--resync-interval=0"}, env(),
			func(o *options) bool { return o.resyncInterval == 0 }, "0"},
		{"--v 2 means debug", []string{"--node-name=a", "--v", "2"}, env(),
			func(o *options) bool { return o.LogLevel == slog.LevelDebug }, "debug"},
		{"--v=1 means debug", []string{"--node-name=a", "-v=1"}, env(),
			func(o *options) bool { return o.LogLevel == slog.LevelDebug }, "debug"},
		{"--v=0 means info", []string{"--node-name=a", "--v=0", "--log-level=error"}, env(),
			func(o *options) bool { return o.LogLevel == slog.LevelError }, "error: --log-level wins"},
		{"--v=0 alone means info", []string{"--node-name=a", "--v=0"}, env(),
			func(o *options) bool { return o.LogLevel == slog.LevelInfo && o.verbosity == 0 }, "info"},
		{"--v=4 means debug, klog verbosity 4", []string{"--node-name=a", "--v=4"}, env(),
			func(o *options) bool { return o.LogLevel == slog.LevelDebug && o.verbosity == 4 }, "debug, 4"},
		{"--v=6 shows klog's V(6)", []string{"--node-name=a", "--v=6"}, env(),
			func(o *options) bool { return o.LogLevel == -6 && o.verbosity == 6 }, "level -6, verbosity 6"},
		{"-v 8, space form", []string{"--node-name=a", "-v", "8"}, env(),
			func(o *options) bool { return o.LogLevel == -8 && o.verbosity == 8 }, "level -8, verbosity 8"},
		{"--log-level wins over --v for the level, not klog's verbosity", []string{"--node-name=a", "--v=6", "--log-level=info"}, env(),
			func(o *options) bool { return o.LogLevel == slog.LevelInfo && o.verbosity == 6 }, "info, verbosity 6"},
		{"no --v: klog verbosity 0", []string{"--node-name=a", "--log-level=debug"}, env(),
			func(o *options) bool { return o.LogLevel == slog.LevelDebug && o.verbosity == 0 }, "debug, verbosity 0"},
		{"space form for every kind", []string{"--node-name", "a", "--debounce", "500ms", "--publish-rate", "0.5", "--publish-burst", "2", "--annotations", "k3s", "--remove-taint=false"}, env(),
			func(o *options) bool {
				return o.nodeName == "a" && o.debounce == 500*time.Millisecond && o.publishRate == 0.5 && o.publishBurst == 2 && len(o.annotations) == 2 && !o.removeTaint
			}, "a 500ms 0.5 2, two k3s annotations, no taint removal"},
		{"--log-level warn, --log-format json", []string{"--node-name=a", "--log-level=warn", "--log-format=json"}, env(),
			func(o *options) bool { return o.LogLevel == slog.LevelWarn && o.LogFormat == "json" }, "warn json"},
		{"dual-stack InternalIP, no ExternalIP", []string{"--node-name=a", "--internal-ip-target=fd00::53, 10.0.0.53", "--external-ip-target=none"}, env(),
			func(o *options) bool {
				return slices.Equal(o.managed(), []resolver.AddressType{resolver.InternalIP}) && len(o.targets()) == 2 &&
					o.targets()[0].IP == netip.MustParseAddr("fd00::53") && o.targets()[1].IP == netip.MustParseAddr("10.0.0.53")
			}, "InternalIP from two targets"},
		{"both types", []string{"--node-name=a", "--internal-ip-target=10.0.0.53"}, env(),
			func(o *options) bool {
				return slices.Equal(o.managed(), []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP}) && len(o.targets()) == 3
			}, "InternalIP and ExternalIP, three targets"},
		{"empty targets mean the defaults", []string{"--node-name=a", "--internal-ip-target=", "--external-ip-target= , "}, env(),
			func(o *options) bool {
				return slices.Equal(o.managed(), []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP}) && len(o.targets()) == 6
			}, "both types, six default targets (apiserver per family and the two fallbacks for InternalIP)"},
		{"none, any case and spacing", []string{"--node-name=a", "--internal-ip-target= None "}, env(),
			func(o *options) bool {
				return slices.Equal(o.managed(), []resolver.AddressType{resolver.ExternalIP}) && len(o.targets()) == 2
			}, "ExternalIP only"},
		{"InternalIP from accepting CIDRs only", []string{"--node-name=a", "--internal-ip-cidrs=10.0.0.0/8", "--external-ip-target=none"}, env(),
			func(o *options) bool {
				return slices.Equal(o.managed(), []resolver.AddressType{resolver.InternalIP}) && len(o.targets()) == 0
			}, "InternalIP managed from interfaces in 10.0.0.0/8, no default target"},
		{"! CIDRs keep the default InternalIP targets", []string{"--node-name=a", "--internal-ip-cidrs=!10.0.0.0/8"}, env(),
			func(o *options) bool { return len(o.internalTargets) == 4 }, "the four default InternalIP targets"},
		{"ExternalIP interfaces keep the default ExternalIP targets", []string{"--node-name=a", "--external-ip-interfaces=eth1"}, env(),
			func(o *options) bool { return len(o.externalTargets) == 2 }, "two default ExternalIP targets"},
		{"--external-ip-equal-internal=keep", []string{"--node-name=a", "--external-ip-equal-internal=keep"}, env(),
			func(o *options) bool { return o.keepExternalEqualInternal && o.policy().KeepExternalEqualInternal }, "keep"},
		{"--debounce-max-delay 0", []string{"--node-name=a", "--debounce-max-delay=0"}, env(),
			func(o *options) bool { return o.debounceMaxDelay == 0 }, "0"},
		{"bind addresses", []string{"--node-name=a", "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:8080"}, env(),
			func(o *options) bool { return o.metricsAddr == "0" && o.probeAddr == "127.0.0.1:8080" }, "0 and 127.0.0.1:8080"},
		{"--version skips validation", []string{"--version", "--publish-rate=0"}, env(),
			func(o *options) bool { return o.Version }, "version"},
		{"run-once, timeout, rate", []string{"--node-name=a", "--run-once", "--timeout=5s", "--publish-rate=0.5", "--publish-burst=1", "--remove-taint=false"}, env(),
			func(o *options) bool {
				return o.runOnce && o.timeout == 5*time.Second && o.publishRate == 0.5 && o.publishBurst == 1 && !o.removeTaint
			}, "run-once 5s 0.5 1 no taint removal"},
		{"policy defaults", []string{"--node-name=a"}, env(),
			func(o *options) bool {
				p := o.policy()
				return !p.AllowSecondary && !p.AllowVIPs && p.ExcludeCIDRs == nil && o.defaultExclusions &&
					len(p.Types[resolver.ExternalIP].ExcludeInterfaces) == len(resolver.DefaultExcludeInterfaces()) &&
					p.Types[resolver.ExternalIP].Interfaces == nil && p.Types[resolver.ExternalIP].CIDRs == nil
			}, "secondaries and VIPs skipped, default interface exclusions, no CIDRs"},
		{"InternalIP from interfaces only", []string{"--node-name=a", "--internal-ip-interfaces=eth1, bond.*", "--external-ip-target=none"}, env(),
			func(o *options) bool {
				tp := o.policy().Types[resolver.InternalIP]
				return slices.Equal(o.managed(), []resolver.AddressType{resolver.InternalIP}) && len(tp.Interfaces) == 2 &&
					tp.Interfaces[0].MatchString("eth1") && !tp.Interfaces[0].MatchString("eth10") && tp.Interfaces[1].MatchString("bond0")
			}, "InternalIP managed, two anchored interface expressions"},
		{"InternalIP from CIDRs only", []string{"--node-name=a", "--internal-ip-cidrs=!10.96.0.0/12,10.0.0.0/8"}, env(),
			func(o *options) bool {
				r := o.policy().Types[resolver.InternalIP].CIDRs
				return slices.Equal(o.managed(), []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP}) &&
					len(r) == 2 && r[0].Exclude && r[0].Prefix == netip.MustParsePrefix("10.96.0.0/12") && !r[1].Exclude
			}, "InternalIP managed from a CIDR list"},
		{"exclusions added to the defaults", []string{"--node-name=a", "--external-ip-exclude-interfaces=wg.*"}, env(),
			func(o *options) bool {
				ex := o.policy().Types[resolver.ExternalIP].ExcludeInterfaces
				return len(ex) == len(resolver.DefaultExcludeInterfaces())+1 && ex[len(ex)-1].MatchString("wg0")
			}, "defaults plus wg.*"},
		{"--default-exclusions=false", []string{"--node-name=a", "--default-exclusions=false", "--external-ip-exclude-interfaces=wg.*"}, env(),
			func(o *options) bool {
				p := o.policy()
				return p.AllowVIPs && len(p.Types[resolver.ExternalIP].ExcludeInterfaces) == 1
			}, "VIPs allowed, only wg.* excluded"},
		{"--allow-secondary, --service-cidr", []string{"--node-name=a", "--allow-secondary", "--service-cidr=10.96.0.0/12,fd00:96::/108"}, env(),
			func(o *options) bool {
				p := o.policy()
				return p.AllowSecondary && slices.Equal(p.ExcludeCIDRs,
					[]netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/108")})
			}, "secondaries allowed, two service CIDRs"},
		{"--annotations from NODEADDR_ANNOTATIONS", []string{"--node-name=a"}, env("NODEADDR_ANNOTATIONS", "k3s, x.io/ip=external-ipv4-cidr"),
			func(o *options) bool {
				return fmt.Sprint(o.annotations) == "[k3s.io/internal-ip=internal-ips k3s.io/external-ip=external-ips x.io/ip=external-ipv4-cidr]"
			}, "k3s's two keys and one explicit key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(tc.args, tc.env)
			if err != nil {
				t.Fatalf("parseFlags(%q) = %v", tc.args, err)
			}
			if !tc.check(o) {
				t.Errorf("parseFlags(%q) = %+v, want %s", tc.args, *o, tc.want)
			}
		})
	}
}

func TestParseFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		env      func(string) string
		hostname func() (string, error)
		want     string // the whole message
	}{
		{"unknown flag", []string{"--bogus=1"}, nil, nil, "unknown flag --bogus"},
		{"unknown flag, one dash", []string{"-bogus"}, nil, nil, "unknown flag -bogus"},
		{"long flag, one dash", []string{"-node-name=a"}, nil, nil, "-node-name: long flags take two dashes: --node-name"},
		{"long boolean flag, one dash", []string{"--node-name=a", "-dry-run"}, nil, nil, "-dry-run: long flags take two dashes: --dry-run"},
		{"bad --v shorthand", []string{"-v=x"}, nil, nil, `--v: invalid value "x": not an integer, e.g. --v=1`},
		{"integer out of range", []string{"--publish-burst=99999999999999999999"}, nil, nil, `--publish-burst: invalid value "99999999999999999999": value out of range`},
		{"missing --v value", []string{"-v"}, nil, nil, "--v needs a value"},
		{"bad flag syntax", []string{"---node-name=a"}, nil, nil, "bad flag syntax: ---node-name=a"},
		{"bad duration", []string{"--debounce=fast"}, nil, nil, `--debounce: invalid value "fast": not a duration (a number with a unit: ms, s, m or h), e.g. --debounce=10ms`},
		{"duration without a unit", []string{"--removal-grace=5"}, nil, nil, `--removal-grace: invalid value "5": not a duration (a number with a unit: ms, s, m or h), e.g. --removal-grace=5s`},
		{"bad duration, zero default", []string{"--reconcile-interval=often"}, nil, nil, `--reconcile-interval: invalid value "often": not a duration (a number with a unit: ms, s, m or h), e.g. --reconcile-interval=10s`},
		{"bad integer", []string{"--publish-burst=many"}, nil, nil, `--publish-burst: invalid value "many": not an integer, e.g. --publish-burst=3`},
		{"bad number", []string{"--publish-rate=fast"}, nil, nil, `--publish-rate: invalid value "fast": not a number, e.g. --publish-rate=1`},
		{"bad boolean", []string{"--dry-run=maybe"}, nil, nil, `--dry-run: invalid value "maybe": not true or false, e.g. --dry-run=true`},
		{"missing value", []string{"--node-name"}, nil, nil, "--node-name needs a value"},
		{"positional argument", []string{"--node-name=a", "extra"}, nil, nil, `unexpected argument "extra": nodeaddr takes only flags`},
		{"bad internal target", []string{"--internal-ip-target=10.0.0.300"}, nil, nil, `--internal-ip-target: "10.0.0.300" is neither an IP address nor apiserver`},
		{"bad external target", []string{"--external-ip-target=dns.google"}, nil, nil, `--external-ip-target: "dns.google" is neither an IP address nor apiserver`},
		{"loopback target", []string{"--internal-ip-target=127.0.0.1"}, nil, nil, "--internal-ip-target: 127.0.0.1 cannot be a target: it must be a routable unicast address"},
		{"zoned target", []string{"--external-ip-target=fe80::1%eth0"}, nil, nil, `--external-ip-target: "fe80::1%eth0" is neither an IP address nor apiserver`},
		{"two IPv4 internal targets", []string{"--internal-ip-target=10.0.0.1,10.0.0.2"}, nil, nil,
			"--internal-ip-target: two IPv4 targets (10.0.0.1 and 10.0.0.2): at most one per family"},
		{"two IPv6 external targets", []string{"--external-ip-target=2001:db8::1,2001:db8::2"}, nil, nil,
			"--external-ip-target: two IPv6 targets (2001:db8::1 and 2001:db8::2): at most one per family"},
		{"both targets none", []string{"--node-name=a", "--external-ip-target=none", "--internal-ip-target=NONE"}, nil, nil,
			"--internal-ip-target and --external-ip-target are both none: nothing to manage"},
		{"none with interfaces", []string{"--node-name=a", "--internal-ip-target=none", "--internal-ip-interfaces=eth1"}, nil, nil,
			"--internal-ip-target=none leaves InternalIP unmanaged, but --internal-ip-interfaces selects addresses for it: drop one of them"},
		{"none with accepting CIDRs", []string{"--node-name=a", "--external-ip-target=none", "--external-ip-cidrs=203.0.113.0/24"}, nil, nil,
			"--external-ip-target=none leaves ExternalIP unmanaged, but --external-ip-cidrs selects addresses for it: drop one of them"},
		{"none among targets", []string{"--node-name=a", "--external-ip-target=none,8.8.8.8"}, nil, nil,
			`--external-ip-target: "none" is neither an IP address nor apiserver`},
		{"bad --external-ip-equal-internal", []string{"--node-name=a", "--external-ip-equal-internal=yes"}, nil, nil,
			`--external-ip-equal-internal: "yes" is not drop or keep`},
		{"negative --debounce", []string{"--debounce=-1s"}, nil, nil, "--debounce: -1s is negative"},
		{"negative --debounce-max-delay", []string{"--debounce-max-delay=-1ms"}, nil, nil, "--debounce-max-delay: -1ms is negative"},
		{"negative --removal-grace", []string{"--removal-grace=-5s"}, nil, nil, "--removal-grace: -5s is negative"},
		{"negative --resync-interval", []string{"--resync-interval=-1m"}, nil, nil, "--resync-interval: -1m0s is negative"},
		{"negative --reconcile-interval", []string{"--reconcile-interval=-10s"}, nil, nil, "--reconcile-interval: -10s is negative"},
		{"negative --timeout", []string{"--timeout=-1s"}, nil, nil, "--timeout: -1s is negative"},
		{"zero --timeout", []string{"--timeout=0"}, nil, nil, "--timeout must be positive"},
		{"--debounce-max-delay below --debounce", []string{"--debounce=2s", "--debounce-max-delay=1s"}, nil, nil,
			"--debounce-max-delay (1s) is shorter than --debounce (2s)"},
		{"--publish-rate 0", []string{"--publish-rate=0"}, nil, nil, "--publish-rate: 0 is not a positive number of writes per second"},
		{"--publish-rate negative", []string{"--publish-rate=-2"}, nil, nil, "--publish-rate: -2 is not a positive number of writes per second"},
		{"--publish-rate NaN", []string{"--publish-rate=NaN"}, nil, nil, "--publish-rate: NaN is not a positive number of writes per second"},
		{"--publish-burst 0", []string{"--publish-burst=0"}, nil, nil, "--publish-burst: 0 is less than 1"},
		{"negative --netlink-receive-buffer", []string{"--netlink-receive-buffer=-1"}, nil, nil, "--netlink-receive-buffer: -1 is negative"},
		{"--v out of range", []string{"--v=11"}, nil, nil, "--v: 11 is not a verbosity between 0 and 10"},
		{"bad --log-level", []string{"--log-level=loud"}, nil, nil, `--log-level: "loud" is not one of debug, info, warn, error`},
		{"bad --log-format", []string{"--log-format=xml"}, nil, nil, `--log-format: "xml" is not text or json`},
		{"bad --metrics-bind-address", []string{"--metrics-bind-address=9810"}, nil, nil, `--metrics-bind-address: "9810" is not host:port or 0`},
		{"bad --health-probe-bind-address", []string{"--health-probe-bind-address=localhost"}, nil, nil, `--health-probe-bind-address: "localhost" is not host:port or 0`},
		{"alias and flag both set", []string{"--reconcile-interval=1m", "--resync-interval=1m"}, nil, nil,
			"--reconcile-interval is a deprecated alias of --resync-interval: set only one"},
		{"no node name", []string{"--run-once"}, nil, nil, "--node-name (or NODE_NAME) is required"},
		{"blank NODE_NAME", nil, env("NODE_NAME", "  "), nil, "--node-name (or NODE_NAME) is required"},
		{"dry run, no hostname", []string{"--dry-run"}, nil, noHost, "--node-name not set and the hostname is unknown: uname failed"},
		{"bad --internal-ip-interfaces", []string{"--internal-ip-interfaces=eth(0"}, nil, nil,
			`--internal-ip-interfaces: "eth(0" is not a valid regular expression: missing closing ): ` + "`eth(0`"},
		{"bad --external-ip-interfaces, the user's pattern quoted", []string{"--external-ip-interfaces=eth0, eth[0"}, nil, nil,
			`--external-ip-interfaces: "eth[0" is not a valid regular expression: missing closing ]: ` + "`[0`"},
		{"an expression valid only once anchored", []string{"--internal-ip-exclude-interfaces=wg)|(eth0"}, nil, nil,
			`--internal-ip-exclude-interfaces: "wg)|(eth0" is not a valid regular expression: unexpected ): ` + "`wg)|(eth0`"},
		{"bad --external-ip-exclude-interfaces", []string{"--external-ip-exclude-interfaces=*"}, nil, nil,
			"--external-ip-exclude-interfaces: \"*\" is not a valid regular expression: missing argument to repetition operator: `*`"},
		{"bad --internal-ip-cidrs", []string{"--internal-ip-cidrs=10.0.0.0/8,!10.1.0.0"}, nil, nil,
			`--internal-ip-cidrs: "10.1.0.0" is not a CIDR`},
		{"bad --external-ip-cidrs", []string{"--external-ip-cidrs=10.0.0.0/33"}, nil, nil,
			`--external-ip-cidrs: "10.0.0.0/33" is not a CIDR`},
		{"bad --service-cidr", []string{"--service-cidr=10.96.0.0"}, nil, nil, `--service-cidr: "10.96.0.0" is not a CIDR`},
		{"bad --annotations preset", []string{"--node-name=a", "--internal-ip-target=none", "--annotations=nodeaddr,calico"}, nil, nil,
			"--annotations: preset calico writes InternalIP, which is not managed"},
		{"bad --annotations format", []string{"--node-name=a", "--annotations=x.io/ip=external"}, nil, nil,
			`--annotations: x.io/ip: format "external" is not one of internal-ipv4, internal-ipv6, internal-ips, internal-ipv4-cidr, internal-ipv6-cidr (or external-…)`},
		{"bad --allow-secondary", []string{"--allow-secondary=sometimes"}, nil, nil, `--allow-secondary: invalid value "sometimes": not true or false, e.g. --allow-secondary=true`},
		{"exclusions for an unmanaged type", []string{"--node-name=a", "--internal-ip-target=none", "--internal-ip-exclude-interfaces=eth1"}, nil, nil,
			"--internal-ip-exclude-interfaces: InternalIP is not managed (it has no --internal-ip-target, --internal-ip-interfaces or accepting --internal-ip-cidrs)"},
		{"--check-install with --dry-run", []string{"--check-install", "--dry-run"}, nil, nil,
			"--check-install and --dry-run are different modes: --check-install checks the install in the cluster and exits, --dry-run prints this host's addresses without a cluster; run one at a time"},
		{"--dry-run with --check-install", []string{"--dry-run", "--check-install"}, nil, nil,
			"--check-install and --dry-run are different modes: --check-install checks the install in the cluster and exits, --dry-run prints this host's addresses without a cluster; run one at a time"},
		{"--check-install with --run-once", []string{"--node-name=a", "--run-once", "--check-install"}, nil, nil,
			"--check-install and --run-once are different modes: --check-install checks the install in the cluster and exits, --run-once reconciles this host's Node once; run one at a time"},
		{"--check-install with --explain", []string{"--check-install", "--explain"}, nil, nil,
			"--check-install and --explain are different modes: --check-install checks the install in the cluster and exits, --explain explains a --dry-run; run one at a time"},
		{"--check-install with -o", []string{"--check-install", "-o", "json"}, nil, nil,
			"--check-install and --output are different modes: --check-install checks the install in the cluster and exits, --output formats --explain's output; run one at a time"},
		{"only ! CIDRs and nothing else", []string{"--node-name=a", "--external-ip-target=none", "--internal-ip-target=none", "--internal-ip-cidrs=!10.0.0.0/8"}, nil, nil,
			"--internal-ip-cidrs: nothing to manage: no target, interface or accepting CIDR for InternalIP or ExternalIP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv, hostname := tc.env, tc.hostname
			if getenv == nil {
				getenv = env()
			}
			if hostname == nil {
				hostname = host("worker-1")
			}
			o, err := parseFlags(tc.args, getenv, hostname, &bytes.Buffer{})
			if err == nil {
				t.Fatalf("parseFlags(%q) = %+v, want an error", tc.args, *o)
			}
			var ue cli.UsageError
			if !errors.As(err, &ue) {
				t.Errorf("error %T is not a cli.UsageError", err)
			}
			if err.Error() != tc.want {
				t.Errorf("parseFlags(%q) error\n  %s\nwant\n  %s", tc.args, err, tc.want)
			}
			if !strings.Contains(err.Error(), "--") && !strings.HasPrefix(tc.name, "positional") && !strings.HasPrefix(err.Error(), "unknown flag -") {
				t.Errorf("error %q names no flag", err)
			}
		})
	}
}

func TestParseFlagsHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help", "--help=true"} {
		var out bytes.Buffer
		_, err := parseFlags([]string{arg}, env(), host("h"), &out)
		if !errors.Is(err, pflag.ErrHelp) {
			t.Errorf("%s: error %v, want pflag.ErrHelp", arg, err)
		}
		if !strings.HasPrefix(out.String(), "Usage: nodeaddr [flags]\n") || !strings.Contains(out.String(), "      --internal-ip-target string") {
			t.Errorf("%s: usage %q", arg, out.String())
		}
	}
	// --help=false is false: the command line runs, and prints no help.
	var out bytes.Buffer
	o, err := parseFlags([]string{"--help=false", "--node-name=a"}, env(), host("h"), &out)
	if err != nil || out.Len() != 0 || o.nodeName != "a" {
		t.Errorf("--help=false: error %v, output %q; want the command line parsed and no help", err, out.String())
	}
	// --help wins over a value another check would refuse, as before.
	if _, err := parseFlags([]string{"--publish-rate=0", "--help"}, env(), host("h"), &out); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("--publish-rate=0 --help: error %v, want pflag.ErrHelp", err)
	}
}

// --help has one section per group, in order, like Kubernetes components; each flag is in exactly
// one; the deprecated alias is hidden (and its group with it).
func TestParseFlagsHelpSections(t *testing.T) {
	var out bytes.Buffer
	if _, err := parseFlags([]string{"--help"}, env(), host("h"), &out); !errors.Is(err, pflag.ErrHelp) {
		t.Fatal(err)
	}
	var sections []string
	flags := map[string]string{}
	for line := range strings.Lines(out.String()) {
		if name, ok := strings.CutSuffix(line, " flags:\n"); ok {
			sections = append(sections, name)
			continue
		}
		// "      --name type   usage" or "  -x, --name type   usage"; continuations are indented deeper.
		if rest, ok := strings.CutPrefix(line, "  "); ok && (strings.HasPrefix(rest, "    --") || strings.HasPrefix(rest, "-")) {
			name := strings.Fields(strings.TrimSpace(rest))[0]
			if strings.HasSuffix(name, ",") { // "-v, --v", "-o, --output"
				name = strings.Fields(strings.TrimSpace(rest))[1]
			}
			if prev, dup := flags[name]; dup {
				t.Errorf("%s in sections %s and %s", name, prev, sections[len(sections)-1])
			}
			flags[name] = sections[len(sections)-1]
		}
	}
	if want := []string{"Node", "Address selection", "External address discovery", "Resolution", "Publishing", "Listeners", "Logging", "Install check"}; !slices.Equal(sections, want) {
		t.Errorf("sections %q, want %q", sections, want)
	}
	for name, section := range map[string]string{"--node-name": "Node", "--internal-ip-target": "Address selection",
		"--external-ip-discovery": "External address discovery", "--resync-interval": "Resolution",
		"--publish-rate": "Publishing", "--metrics-secure": "Listeners", "--v": "Logging",
		"--explain": "Node", "--output": "Node", "--check-install": "Install check"} {
		if flags[name] != section {
			t.Errorf("%s in section %q, want %q", name, flags[name], section)
		}
	}
	if _, shown := flags["--reconcile-interval"]; shown || len(flags) != 51 {
		t.Errorf("%d flags shown (--reconcile-interval among them: %v), want 51 without it:\n%s", len(flags), shown, out.String())
	}
	if !strings.Contains(out.String(), "  -v, --v int ") {
		t.Errorf("no -v, --v line:\n%s", out.String())
	}
}

func runArgs(t *testing.T, getenv func(string) string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(t.Context(), testEnv(getenv, &out, &errOut), args)
	return code, out.String(), errOut.String()
}

func TestRunUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--bogus"}, "--bogus"},
		{[]string{"--node-name=a", "--internal-ip-target=300.1.1.1"}, "--internal-ip-target"},
		{[]string{"--node-name=a", "--external-ip-target=8.8.8.8,1.1.1.1"}, "--external-ip-target"},
		{[]string{"--node-name=a", "--external-ip-target=none", "--internal-ip-target=none"}, "--internal-ip-target"},
		{[]string{"--node-name=a", "--internal-ip-target=none", "--internal-ip-interfaces=eth0"}, "--internal-ip-target"},
		{[]string{"--node-name=a", "--external-ip-equal-internal=maybe"}, "--external-ip-equal-internal"},
		{[]string{"--node-name=a", "--removal-grace=-1s"}, "--removal-grace"},
		{[]string{"--node-name=a", "--debounce-max-delay=5ms"}, "--debounce-max-delay"},
		{[]string{"--node-name=a", "--publish-rate=0"}, "--publish-rate"},
		{[]string{"--node-name=a", "--publish-burst=0"}, "--publish-burst"},
		{[]string{"--node-name=a", "--log-level=trace"}, "--log-level"},
		{[]string{"--node-name=a", "--log-format=yaml"}, "--log-format"},
		{[]string{"--run-once"}, "--node-name"},
		{[]string{"--node-name=a", "--explain"}, "--dry-run"},
		{[]string{"--dry-run", "--node-name=a", "--explain", "-o", "yaml"}, "--output"},
		{[]string{"--dry-run", "--node-name=a", "-o", "json"}, "--explain"},
		{[]string{"--dry-run", "--check-install"}, "--check-install and --dry-run"},
		{[]string{"--check-install", "--run-once"}, "--check-install and --run-once"},
		{[]string{"--node-name=a", "--internal-ip-interfaces=eth[0"}, "\"eth[0\" is not a valid regular expression: missing closing ]: `[0`"},
		{[]string{"--node-name=a", "--internal-ip-interfaces=("}, "--internal-ip-interfaces"},
		{[]string{"--node-name=a", "--external-ip-cidrs=!x"}, "--external-ip-cidrs"},
		{[]string{"--node-name=a", "--service-cidr=10.96.0.0/40"}, "--service-cidr"},
		{[]string{"--node-name=a", "--internal-ip-target=none", "--annotations=k3s.io/internal-ip=internal-ips"}, "--annotations"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runArgs(t, env(), tc.args...)
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") ||
				!strings.HasPrefix(stderr, "nodeaddr: ") || !strings.Contains(stderr, tc.flag) {
				t.Errorf("stderr %q, want one line naming %s", stderr, tc.flag)
			}
		})
	}
}

func TestRunUnknownFlagMessage(t *testing.T) {
	code, _, stderr := runArgs(t, env(), "--node-name=a", "--reconcile-period=10s")
	if code != 2 || stderr != "nodeaddr: unknown flag --reconcile-period (see --help)\n" {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestRunVersionAndHelp(t *testing.T) {
	code, stdout, stderr := runArgs(t, env(), "--version")
	if code != 0 || stdout != testEnv(nil, nil, nil).VersionLine()+"\n" || stderr != "" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = runArgs(t, env(), "--help")
	if code != 0 || !strings.HasPrefix(stdout, "Usage: nodeaddr") || stderr != "" {
		t.Errorf("--help: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// A kubeconfig that does not exist fails before any cluster or kernel access: exit 1, one clear
// error line.
func TestRunMissingKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		getenv func(string) string
		path   string
	}{
		{"--kubeconfig", []string{"--kubeconfig=/nonexistent"}, env(), "/nonexistent"},
		{"KUBECONFIG", nil, env("KUBECONFIG", "/nonexistent/from-env"), "/nonexistent/from-env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := slices.Concat(tc.args, []string{"--node-name=x", "--run-once", "--metrics-bind-address=0", "--health-probe-bind-address=0"})
			code, stdout, stderr := runArgs(t, tc.getenv, args...)
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(stderr, "level=ERROR") || !strings.Contains(stderr, `msg="nodeaddr failed"`) ||
				!strings.Contains(stderr, "kubeconfig "+tc.path+": ") || !strings.Contains(stderr, "no such file or directory") {
				t.Errorf("stderr %q, want one error line naming the kubeconfig %s", stderr, tc.path)
			}
		})
	}
}

func TestRunMissingKubeconfigJSON(t *testing.T) {
	code, _, stderr := runArgs(t, env(), "--kubeconfig=/nonexistent", "--node-name=x", "--run-once", "--log-format=json",
		"--reconcile-interval=1m", "--metrics-bind-address=0", "--health-probe-bind-address=0")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	var lines []map[string]any
	for line := range strings.Lines(stderr) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", line, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 || lines[0]["level"] != "WARN" || lines[0]["msg"] != "--reconcile-interval is deprecated, use --resync-interval" ||
		lines[1]["level"] != "ERROR" || lines[1]["err"] != "kubeconfig /nonexistent: stat /nonexistent: no such file or directory" {
		t.Errorf("stderr %q, want the deprecation warning then the error", stderr)
	}
}

// Every flag local-ccm takes and nodeaddr does not gets one line that names it and says what to do,
// in either spelling (klog's underscores, one or two dashes); the run exits 2.
func TestLocalCCMFlagsGetAMigrationHint(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"--external-ip-subnet=203.0.113.0/24", `--external-ip-subnet: local-ccm's flag, not nodeaddr's: use --external-ip-cidrs=CIDR (the address in that subnet, on any interface) or an --external-ip-target routed through it (docs/upgrade.md, "Migrating from local-ccm")`},
		{"--logtostderr", `--logtostderr: local-ccm's flag, not nodeaddr's: nodeaddr always logs to stderr: drop it (--log-format=json for JSON) (docs/upgrade.md, "Migrating from local-ccm")`},
		{"-logtostderr=true", `-logtostderr: local-ccm's flag, not nodeaddr's: nodeaddr always logs to stderr: drop it (--log-format=json for JSON) (docs/upgrade.md, "Migrating from local-ccm")`},
		{"--log_dir=/var/log", `--log_dir: local-ccm's flag, not nodeaddr's: nodeaddr logs only to stderr: drop it (docs/upgrade.md, "Migrating from local-ccm")`},
		{"--log-file=/x.log", `--log-file: local-ccm's flag, not nodeaddr's: nodeaddr logs only to stderr: drop it (docs/upgrade.md, "Migrating from local-ccm")`},
		{"--vmodule=node*=4", `--vmodule: local-ccm's flag, not nodeaddr's: use --v=N or --log-level (one level for the whole program) (docs/upgrade.md, "Migrating from local-ccm")`},
		{"--bogus", "unknown flag --bogus"},
	} {
		code, stdout, stderr := runArgs(t, env(), "--node-name=n", tc.arg)
		if want := "nodeaddr: " + tc.want + " (see --help)\n"; code != 2 || stdout != "" || stderr != want {
			t.Errorf("%s: exit %d, stdout %q, stderr\n  %q\nwant exit 2 and\n  %q", tc.arg, code, stdout, stderr, want)
		}
	}
	// Every hint is reachable: each listed name is refused with its own hint.
	for name, hint := range localCCMHints {
		_, err := parse([]string{"--" + name}, env())
		if err == nil || !strings.Contains(err.Error(), hint) {
			t.Errorf("--%s: error %v, want the hint %q", name, err, hint)
		}
		if fsHas(name) {
			t.Errorf("--%s is a nodeaddr flag: it needs no migration hint", name)
		}
	}
}

// fsHas reports whether nodeaddr defines the flag name.
func fsHas(name string) bool {
	return (&options{}).defineFlags(func(string) string { return "" }).all().Lookup(name) != nil
}

// Plain --dry-run opens no listener, silently: no /metrics and no probes, so it runs beside an
// agent that holds the ports and in a fresh network namespace whose loopback is down (the README's
// demo, TestREADMEHandDemo). A listener's flag given explicitly keeps that listener (or main's
// warning that --dry-run cannot serve /metrics securely).
func TestDryRunListenersOnlyWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		metrics, probe string
	}{
		{[]string{"--dry-run"}, "0", "0"},
		{[]string{"--dry-run", "--run-once"}, "0", "0"},
		{[]string{"--node-name=n"}, ":9810", "127.0.0.1:9811"},
		{[]string{"--node-name=n", "--run-once"}, ":9810", "127.0.0.1:9811"},
		{[]string{"--dry-run", "--metrics-bind-address=:9810"}, ":9810", "0"},
		{[]string{"--dry-run", "--metrics-secure=true"}, ":9810", "0"},
		{[]string{"--dry-run", "--metrics-secure=false", "--metrics-bind-address=127.0.0.1:9900"}, "127.0.0.1:9900", "0"},
		{[]string{"--dry-run", "--health-probe-bind-address=127.0.0.1:9811"}, "0", "127.0.0.1:9811"},
		{[]string{"--dry-run", "--health-probe-bind-address=127.0.0.1:9901", "--metrics-secure=false", "--metrics-bind-address=127.0.0.1:9900"},
			"127.0.0.1:9900", "127.0.0.1:9901"},
	} {
		o, err := parse(tc.args, env())
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if o.metricsAddr != tc.metrics || o.probeAddr != tc.probe {
			t.Errorf("%q: metrics address %q, probes %q; want %q and %q", tc.args, o.metricsAddr, o.probeAddr, tc.metrics, tc.probe)
		}
	}
	// The agent itself, stopped before it starts (a cancelled context; its listeners open first):
	// the warning about /metrics comes only with the explicit flag. The default probe port is held,
	// as by an agent running on this host (or already is): a dry run does not need it.
	if l, err := net.Listen("tcp", "127.0.0.1:9811"); err == nil {
		defer l.Close()
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		args []string
		warn bool
	}{
		{[]string{"--dry-run"}, false},
		{[]string{"--dry-run", "--metrics-bind-address=:9810"}, true},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(ctx, testEnv(env(), &stdout, &stderr), tc.args)
		if warned := strings.Contains(stderr.String(), `level=WARN msg="/metrics disabled`); code != 0 || warned != tc.warn {
			t.Errorf("%q: exit %d, warned about /metrics %v; want 0 and %v; stderr:\n%s", tc.args, code, warned, tc.warn, stderr.String())
		}
	}
}

// --help ends with examples, and each example is a command line nodeaddr accepts.
func TestHelpExamplesParse(t *testing.T) {
	var out bytes.Buffer
	if _, err := parseFlags([]string{"--help"}, env(), host("h"), &out); !errors.Is(err, pflag.ErrHelp) {
		t.Fatal(err)
	}
	_, examples, ok := strings.Cut(out.String(), "\nExamples:\n")
	if !ok {
		t.Fatalf("--help has no Examples section:\n%s", out.String())
	}
	n := 0
	for line := range strings.Lines(examples) {
		cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "nodeaddr ")
		if !ok {
			continue
		}
		n++
		args := strings.Fields(strings.NewReplacer("$(NODE_NAME)", "node-1", "'", "").Replace(cmd))
		if _, err := parse(args, env()); err != nil {
			t.Errorf("example %q: %v", strings.TrimSpace(line), err)
		}
	}
	if n < 4 {
		t.Errorf("%d examples, want at least 4:\n%s", n, examples)
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

// testEnv is the process the tests run the agent in.
func testEnv(getenv func(string) string, stdout, stderr io.Writer) cli.Env {
	return cli.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr, Version: "test", Revision: "unknown"}
}
