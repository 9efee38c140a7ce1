package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"
)

// markDeprecated hides local-ccm's aliases from --help and marks them for the deprecation
// warnings (deprecationWarnings).
func markDeprecated(fs *pflag.FlagSet) {
	_ = fs.MarkDeprecated("reconcile-interval", "use --resync-interval")
	_ = fs.MarkDeprecated("approve-kubelet-serving-csr", "the agents no longer approve CSRs: run the central approver (nodeaddr approver, deploy/components/kubelet-serving-csr); the flag now means --approval-record")
}

// deprecationWarnings are the warnings for the deprecated flags set on the command line. pflag
// prints its own "Flag --x has been deprecated" line straight to stderr (what Kubernetes
// components show); nodeaddr discards that output and main logs these through the logger instead,
// so they keep their wording and the --log-format of every other line.
func deprecationWarnings(fs *pflag.FlagSet) []string {
	var w []string
	fs.Visit(func(f *pflag.Flag) {
		if f.Deprecated != "" {
			w = append(w, fmt.Sprintf("--%s is deprecated, %s", f.Name, f.Deprecated))
		}
	})
	return w
}

// applyCompat applies local-ccm's --reconcile-interval alias of --resync-interval.
func (o *options) applyCompat(fs *pflag.FlagSet, r *rawFlags) error {
	o.deprecations = deprecationWarnings(fs)
	if !fs.Changed("reconcile-interval") {
		return nil
	}
	if fs.Changed("resync-interval") {
		return usagef("--reconcile-interval is a deprecated alias of --resync-interval: set only one")
	}
	if r.reconcile < 0 {
		return usagef("--reconcile-interval: %s is negative", r.reconcile)
	}
	o.resyncInterval = r.reconcile
	return nil
}

// setLogLevel sets the handler level and klog's verbosity from --log-level and --v (local-ccm's
// and Kubernetes components' flag). --v=N sets klog's verbosity to N and, when --log-level is not
// given, the level: info for 0, debug for 1 to 4, -N above (klog's V(N) arrives at slog as level
// -N, so --v=6 shows client-go's request lines).
func (o *options) setLogLevel(fs *pflag.FlagSet, r *rawFlags) error {
	level := r.logLevel
	if fs.Changed("v") {
		if r.v < 0 || r.v > 10 {
			return usagef("--v: %d is not a verbosity between 0 and 10", r.v)
		}
		o.verbosity = r.v
	}
	if err := o.logLevel.UnmarshalText([]byte(level)); err != nil {
		return usagef("--log-level: %q is not one of debug, info, warn, error", level)
	}
	if fs.Changed("v") && !fs.Changed("log-level") {
		o.logLevel = verbosityLevel(r.v)
	}
	return nil
}

// verbosityLevel is the slog level that shows klog's V(v) and nodeaddr's debug lines for v >= 1.
func verbosityLevel(v int) slog.Level {
	switch {
	case v <= 0:
		return slog.LevelInfo
	case -slog.Level(v) > slog.LevelDebug:
		return slog.LevelDebug
	default:
		return -slog.Level(v)
	}
}
