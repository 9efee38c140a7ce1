package agentcmd

import (
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"

	"github.com/nodeaddr/nodeaddr/resolver/discovery"
)

// discoveryOptions are the flags of external-address discovery (docs/nat.md).
type discoveryOptions struct {
	raw                  string
	servers              []discovery.Server
	interval, staleAfter time.Duration
}

func (d *discoveryOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&d.raw, "external-ip-discovery", "", "discover the ExternalIP behind NAT with STUN: comma-separated stun:HOST:PORT servers (an IPv6 address in brackets), asked from the route source; the address a majority agrees on replaces the route source as ExternalIP. Empty: off, nothing is sent")
	fs.DurationVar(&d.interval, "external-ip-discovery-interval", discovery.DefaultInterval, "how often the discovered address is checked again (jittered by up to 10%), besides at start and whenever the route source changes")
	fs.DurationVar(&d.staleAfter, "external-ip-discovery-stale-after", discovery.DefaultStaleAfter, "how long a discovered address stays published while no round of probes confirms it (servers down or disagreeing); then that family's ExternalIP is withdrawn")
}

// validate parses the servers and checks the durations once every flag is parsed.
func (d *discoveryOptions) validate() error {
	var err error
	if d.servers, err = discovery.ParseServers(d.raw); err != nil {
		return cli.Usagef("--external-ip-discovery: %v", err)
	}
	if d.interval <= 0 {
		return cli.Usagef("--external-ip-discovery-interval: %s is not positive", d.interval)
	}
	if d.staleAfter <= 0 {
		return cli.Usagef("--external-ip-discovery-stale-after: %s is not positive", d.staleAfter)
	}
	if d.staleAfter < d.interval {
		return cli.Usagef("--external-ip-discovery-stale-after (%s) is shorter than --external-ip-discovery-interval (%s): the address would lapse between two checks",
			d.staleAfter, d.interval)
	}
	return nil
}

// agentConfig is agent.Config.Discovery (its Prober is the agent's), nil when off.
func (d *discoveryOptions) agentConfig(log *slog.Logger, m *discovery.Metrics) *discovery.Config {
	if len(d.servers) == 0 {
		return nil
	}
	return &discovery.Config{Servers: d.servers, Interval: d.interval, StaleAfter: d.staleAfter, Logger: log, Metrics: m}
}
