package agentcmd

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/watcher"
)

// resolutionOptions are the Resolution section's flags, and the Compatibility section's alias.
type resolutionOptions struct {
	debounce, debounceMaxDelay time.Duration
	linkDebounce, removalGrace time.Duration
	resyncInterval             time.Duration
	netlinkRcvBuf              int
	reconcile                  time.Duration // --reconcile-interval, local-ccm's name of --resync-interval
}

func (r *resolutionOptions) addFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&r.debounce, "debounce", 10*time.Millisecond, "quiet time after the last address, route or rule event before resolving")
	fs.DurationVar(&r.linkDebounce, "link-debounce", 100*time.Millisecond, "hold after the last link event (carrier, operational state) before resolving, so that a flapping carrier is not published (never shorter than --debounce)")
	fs.DurationVar(&r.debounceMaxDelay, "debounce-max-delay", time.Second, "longest delay from the first kernel event of a burst to its resolution")
	fs.DurationVar(&r.removalGrace, "removal-grace", 5*time.Second, "how long an address must be gone, with no replacement, before it is removed from the Node")
	fs.DurationVar(&r.resyncInterval, "resync-interval", 60*time.Second, "periodic full resolution, the backstop for missed events (0 disables)")
	fs.IntVar(&r.netlinkRcvBuf, "netlink-receive-buffer", 4<<20, "requested netlink socket receive buffer in bytes (capped by net.core.rmem_max)")
}

// addCompatFlags defines local-ccm's --reconcile-interval, deprecated (hidden from --help; pflag's
// own deprecation line goes to the discarded output: main logs it, in --log-format).
func (r *resolutionOptions) addCompatFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&r.reconcile, "reconcile-interval", 0, "alias of --resync-interval (local-ccm)")
	_ = fs.MarkDeprecated("reconcile-interval", "use --resync-interval")
}

func (r *resolutionOptions) validate(fs *pflag.FlagSet) error {
	if fs.Changed("reconcile-interval") {
		if fs.Changed("resync-interval") {
			return cli.Usagef("--reconcile-interval is a deprecated alias of --resync-interval: set only one")
		}
		if r.reconcile < 0 {
			return cli.Usagef("--reconcile-interval: %s is negative", r.reconcile)
		}
		r.resyncInterval = r.reconcile
	}
	if err := negative(fs, "debounce", "link-debounce", "debounce-max-delay", "removal-grace", "resync-interval"); err != nil {
		return err
	}
	if r.debounceMaxDelay > 0 && r.debounceMaxDelay < r.debounce {
		return cli.Usagef("--debounce-max-delay (%s) is shorter than --debounce (%s)", r.debounceMaxDelay, r.debounce)
	}
	if r.netlinkRcvBuf < 0 {
		return cli.Usagef("--netlink-receive-buffer: %d is negative", r.netlinkRcvBuf)
	}
	return nil
}

// negative refuses a negative value of the duration flags named.
func negative(fs *pflag.FlagSet, names ...string) error {
	for _, name := range names {
		if d, _ := fs.GetDuration(name); d < 0 {
			return cli.Usagef("--%s: %s is negative", name, d)
		}
	}
	return nil
}

// loopConfig is the resolver loop's configuration with the selection policy.
func (r *resolutionOptions) loopConfig(policy resolver.Policy, log *slog.Logger, reg prometheus.Registerer) resolver.LoopConfig {
	return resolver.LoopConfig{
		Kernel: resolver.Netlink{}, Policy: policy,
		Debounce: r.debounce, LinkDebounce: r.linkDebounce, MaxDelay: r.debounceMaxDelay, RemovalGrace: r.removalGrace,
		ResyncInterval: r.resyncInterval, Logger: log, Metrics: resolver.NewMetrics(reg),
	}
}

// watcherConfig is the netlink watcher's configuration.
func (r *resolutionOptions) watcherConfig(log *slog.Logger, m *watcher.Metrics) *watcher.Config {
	return &watcher.Config{ReceiveBufferSize: r.netlinkRcvBuf, Logger: log, Metrics: m}
}
