package main

import (
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/resolver/discovery"
)

// discoveryOptions are the flags of external-address discovery (docs/nat.md).
type discoveryOptions struct {
	raw        string
	servers    []discovery.Server
	interval   time.Duration
	staleAfter time.Duration
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
		return usagef("--external-ip-discovery: %v", err)
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"external-ip-discovery-interval", d.interval}, {"external-ip-discovery-stale-after", d.staleAfter}} {
		if f.v <= 0 {
			return usagef("--%s: %s is not positive", f.name, f.v)
		}
	}
	if d.staleAfter < d.interval {
		return usagef("--external-ip-discovery-stale-after (%s) is shorter than --external-ip-discovery-interval (%s): the address would lapse between two checks",
			d.staleAfter, d.interval)
	}
	return nil
}

// enabled reports whether discovery is configured.
func (d *discoveryOptions) enabled() bool { return len(d.servers) > 0 }

// config is the discoverer's configuration (its Prober, Logger and Metrics are the caller's).
func (d *discoveryOptions) config() discovery.Config {
	return discovery.Config{Servers: d.servers, Interval: d.interval, StaleAfter: d.staleAfter}
}

// agentConfig is the agent's discovery (agent.Config.Discovery), nil when off; New creates the
// probe series of its servers on m.
func (d *discoveryOptions) agentConfig(log *slog.Logger, m *discovery.Metrics) *discovery.Config {
	if !d.enabled() {
		return nil
	}
	cfg := d.config()
	cfg.Logger, cfg.Metrics = log, m
	return &cfg
}
