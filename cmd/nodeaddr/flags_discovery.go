package main

import (
	"errors"
	"flag"
	"strings"
	"time"

	"github.com/nodeaddr/nodeaddr/resolver/discovery"
)

// discoveryOptions are the flags of external-address discovery (README, "ExternalIP behind NAT").
// Each value checks itself in Set, so a bad one is a usage error (exit 2) from Parse, and each has
// pflag.Value's Type method: the definitions move onto a pflag FlagSet with fs.Var unchanged.
type discoveryOptions struct {
	servers    []discovery.Server
	interval   time.Duration
	staleAfter time.Duration
}

func (d *discoveryOptions) addFlags(fs *flag.FlagSet) {
	d.interval, d.staleAfter = discovery.DefaultInterval, discovery.DefaultStaleAfter
	fs.Var(serversValue{&d.servers}, "external-ip-discovery", "discover the ExternalIP behind NAT with STUN: comma-separated stun:HOST:PORT servers (an IPv6 address in brackets), asked from the route source; the address a majority agrees on replaces the route source as ExternalIP. Empty (the default): off, nothing is sent")
	fs.Var(durationValue{&d.interval}, "external-ip-discovery-interval", "how often the discovered address is checked again (jittered by up to 10%), besides at start and whenever the route source changes")
	fs.Var(durationValue{&d.staleAfter}, "external-ip-discovery-stale-after", "how long a discovered address stays published while no round of probes confirms it (servers down or disagreeing); then that family's ExternalIP is withdrawn")
}

// validate checks the pair once every flag is parsed.
func (d *discoveryOptions) validate() error {
	if d.staleAfter < d.interval {
		return usagef("--external-ip-discovery-stale-after (%s) is shorter than --external-ip-discovery-interval (%s): the address would lapse between two checks",
			d.staleAfter, d.interval)
	}
	return nil
}

// enabled reports whether discovery is configured.
func (d *discoveryOptions) enabled() bool { return len(d.servers) > 0 }

// config is the discoverer's configuration (its Prober, Logger and observers are the caller's).
func (d *discoveryOptions) config() discovery.Config {
	return discovery.Config{Servers: d.servers, Interval: d.interval, StaleAfter: d.staleAfter}
}

// serversValue is --external-ip-discovery.
type serversValue struct{ p *[]discovery.Server }

func (v serversValue) String() string {
	if v.p == nil {
		return ""
	}
	s := make([]string, len(*v.p))
	for i, srv := range *v.p {
		s[i] = "stun:" + srv.String()
	}
	return strings.Join(s, ",")
}

func (v serversValue) Set(s string) error {
	servers, err := discovery.ParseServers(s)
	if err != nil {
		return err
	}
	*v.p = servers
	return nil
}

func (serversValue) Type() string { return "stun-servers" }

// durationValue is a positive duration.
type durationValue struct{ p *time.Duration }

func (v durationValue) String() string {
	if v.p == nil {
		return ""
	}
	return v.p.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration such as 5m or 1h")
	}
	if d <= 0 {
		return errors.New("must be positive")
	}
	*v.p = d
	return nil
}

func (durationValue) Type() string { return "duration" }
