package main

import (
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// validateFlags checks the values that no other step looked at: durations, rates, logging, listeners.
func (o *options) validateFlags(fs *pflag.FlagSet, r *rawFlags) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"debounce", o.debounce}, {"link-debounce", o.linkDebounce}, {"debounce-max-delay", o.debounceMaxDelay}, {"removal-grace", o.removalGrace},
		{"resync-interval", o.resyncInterval}, {"timeout", o.timeout},
		{"overwrite-backoff", o.overwriteBackoff}, {"overwrite-backoff-max", o.overwriteMax}} {
		if d.v < 0 {
			return usagef("--%s: %s is negative", d.name, d.v)
		}
	}
	if o.debounceMaxDelay > 0 && o.debounceMaxDelay < o.debounce {
		return usagef("--debounce-max-delay (%s) is shorter than --debounce (%s)", o.debounceMaxDelay, o.debounce)
	}
	if o.overwriteBackoff == 0 {
		return usagef("--overwrite-backoff must be positive")
	}
	if o.overwriteMax < o.overwriteBackoff {
		return usagef("--overwrite-backoff-max (%s) is shorter than --overwrite-backoff (%s)", o.overwriteMax, o.overwriteBackoff)
	}
	if o.timeout == 0 {
		return usagef("--timeout must be positive")
	}
	if !(o.publishRate > 0) {
		return usagef("--publish-rate: %v is not a positive number of writes per second", o.publishRate)
	}
	if o.publishBurst < 1 {
		return usagef("--publish-burst: %d is less than 1", o.publishBurst)
	}
	if o.netlinkRcvBuf < 0 {
		return usagef("--netlink-receive-buffer: %d is negative", o.netlinkRcvBuf)
	}
	if err := o.validateExplain(fs); err != nil {
		return err
	}
	if err := o.setLogLevel(fs, r); err != nil {
		return err
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return usagef("--log-format: %q is not text or json", o.logFormat)
	}
	for _, a := range []struct{ name, v string }{{"metrics-bind-address", o.metricsAddr}, {"health-probe-bind-address", o.probeAddr}} {
		if a.v != "0" && a.v != "" && !strings.Contains(a.v, ":") {
			return usagef("--%s: %q is not host:port or 0", a.name, a.v)
		}
	}
	if err := o.discovery.validate(); err != nil {
		return err
	}
	return o.validate(o.metricsAddr) // listenerOptions.validate
}

// validateExplain: --explain explains a dry run's output, and -o formats only the explanation.
func (o *options) validateExplain(fs *pflag.FlagSet) error {
	if o.explain && !o.dryRun {
		return usagef("--explain needs --dry-run (it explains the addresses a dry run prints)")
	}
	if o.output != "text" && o.output != "json" {
		return usagef("--output: %q is not text or json", o.output)
	}
	if fs.Changed("output") && !o.explain {
		return usagef("--output formats --explain's output: add --explain (and --dry-run)")
	}
	return nil
}

// checkModes refuses a command line that asks for two runs at once. --check-install is a command
// of its own: it judges a cluster's install and exits, with no Node and no kernel. --dry-run and
// --run-once shape the agent's run and combine (print once and exit); --explain and -o belong to
// --dry-run. Silently letting one of them win would run something the user did not ask for.
func (o *options) checkModes(fs *pflag.FlagSet) error {
	if !o.check.enabled {
		return nil
	}
	for _, m := range []struct {
		flag string
		set  bool
		does string
	}{
		{"--dry-run", o.dryRun, "--dry-run prints this host's addresses without a cluster"},
		{"--run-once", o.runOnce, "--run-once reconciles this host's Node once"},
		{"--explain", o.explain, "--explain explains a --dry-run"},
		{"--output", fs.Changed("output"), "--output formats --explain's output"},
	} {
		if m.set {
			return usagef("--check-install and %s are different modes: --check-install checks the install in the cluster and exits, %s; run one at a time",
				m.flag, m.does)
		}
	}
	return nil
}
