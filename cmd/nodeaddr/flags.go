package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// options are the parsed, validated command-line flags.
type options struct {
	nodeName, kubeconfig              string
	internalTargets, externalTargets  []resolver.Target
	debounce, debounceMaxDelay        time.Duration
	linkDebounce, removalGrace        time.Duration
	resyncInterval, timeout           time.Duration
	overwriteBackoff, overwriteMax    time.Duration
	publishRate                       float64
	publishBurst, netlinkRcvBuf       int
	removeTaint, runOnce, dryRun      bool
	approvalRecord                    bool   // also set by the deprecated --approve-kubelet-serving-csr
	explain                           bool   // why each address was chosen or dropped (dry run only)
	output                            string // -o: the explanation's format, text or json
	metricsAddr, probeAddr, logFormat string
	logLevel                          slog.Level
	verbosity                         int  // --v: klog's verbosity (client-go logs its requests at 6)
	version, help                     bool // help: --help (-h and -help are pflag's ErrHelp)
	deprecations                      []string
	warnings                          []string // about a valid combination of flags likely not meant

	// Selection policy (docs/configuration.md, "Selection policy").
	typePolicy                        map[resolver.AddressType]resolver.TypePolicy
	allowSecondary, defaultExclusions bool
	serviceCIDRs                      []netip.Prefix
	annotations                       []vocab.AnnotationSpec
	keepExternalEqualInternal         bool // --external-ip-equal-internal=keep

	listenerOptions
	discovery discoveryOptions
	check     checkOptions // --check-install
}

// usageError is a bad command line: exit code 2, one line on stderr.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// parseFlags parses args (without the program name). getenv supplies NODE_NAME, KUBECONFIG and
// NODEADDR_ANNOTATIONS; hostname the dry-run default node name. -h/--help returns pflag.ErrHelp
// after printing usage to out.
func parseFlags(args []string, getenv func(string) string, hostname func() (string, error), out io.Writer) (*options, error) {
	o := &options{}
	r := &rawFlags{}
	groups := o.defineFlags(r, getenv)
	fs := groups.all()
	// The deprecated aliases are hidden from --help; applyCompat warns about them.
	_ = fs.MarkDeprecated("reconcile-interval", "use --resync-interval")
	_ = fs.MarkDeprecated("approve-kubelet-serving-csr", "the agents no longer approve CSRs: run the central approver (nodeaddr approver, deploy/components/kubelet-serving-csr); the flag now means --approval-record")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) { // -h or -help, which pflag answers itself
			groups.printUsage(out)
			return nil, err
		}
		// One line, whatever the user typed: a flag name may contain a newline.
		return nil, usageError{strings.ReplaceAll(flagMessage(fs, err), "\n", `\n`)}
	}
	if o.help {
		groups.printUsage(out)
		return nil, pflag.ErrHelp
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q: nodeaddr takes only flags", fs.Arg(0))
	}
	if o.version {
		return o, nil
	}
	if o.kubeconfig == "" {
		o.kubeconfig = getenv("KUBECONFIG")
	}
	if o.check.enabled { // a mode of its own: no Node, no kernel, no selection policy
		// A flag of the agent's run is refused: letting one win would run something not asked for.
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
				return nil, usagef("--check-install and %s are different modes: --check-install checks the install in the cluster and exits, %s; run one at a time",
					m.flag, m.does)
			}
		}
		if o.timeout <= 0 {
			return nil, usagef("--timeout must be positive")
		}
		return o, o.check.validate()
	}
	if err := o.buildPolicy(fs, r); err != nil {
		return nil, err
	}
	if err := o.applyCompat(fs, r); err != nil {
		return nil, err
	}
	if err := o.validateFlags(fs, r); err != nil {
		return nil, err
	}
	// Without --node-name, a dry run takes the hostname (lowercased, as the kubelet does).
	if o.nodeName = strings.TrimSpace(o.nodeName); o.nodeName == "" {
		if !o.dryRun {
			return nil, usagef("--node-name (or NODE_NAME) is required")
		}
		h, err := hostname()
		if err != nil {
			return nil, usagef("--node-name not set and the hostname is unknown: %v", err)
		}
		o.nodeName = strings.ToLower(h)
	}
	o.applyDryRunListeners(fs)
	return o, nil
}

// rawFlags hold the flag values that become options only after parsing or cross-checks.
type rawFlags struct {
	externalEqual, logLevel, serviceCIDR, annotations string
	reconcile                                         time.Duration
	v                                                 int
	perType                                           map[resolver.AddressType]*typeFlags
}

// typeFlags are the selection flags of one address type.
type typeFlags struct{ target, interfaces, exclude, cidrs string }

// addressTypes are the types nodeaddr can manage, in the order flags and logs name them.
var addressTypes = []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP}

// flagPrefix is the flag-name prefix of an address type: internal-ip or external-ip.
func flagPrefix(t resolver.AddressType) string {
	if t == resolver.InternalIP {
		return "internal-ip"
	}
	return "external-ip"
}

// applyDryRunListeners opens no listener under --dry-run unless its flag asks for one: a dry run
// has no kubelet and no API server to check tokens, and often runs where a listener cannot open
// (beside a running agent, or in a fresh network namespace whose loopback is down), so a warning
// about a listener nobody asked for would be noise. One asked for is served, or main warns.
func (o *options) applyDryRunListeners(fs *pflag.FlagSet) {
	if !o.dryRun {
		return
	}
	if !fs.Changed("health-probe-bind-address") {
		o.probeAddr = "0"
	}
	for _, name := range []string{"metrics-bind-address", "metrics-secure", "tls-cert-file",
		"tls-private-key-file"} {
		if fs.Changed(name) {
			return
		}
	}
	o.metricsAddr = "0"
}

// validateFlags checks the values that no other step looked at: durations, rates, logging, listeners.
func (o *options) validateFlags(fs *pflag.FlagSet, r *rawFlags) error {
	for _, name := range []string{"debounce", "link-debounce", "debounce-max-delay", "removal-grace",
		"resync-interval", "timeout", "overwrite-backoff", "overwrite-backoff-max"} {
		if d, _ := fs.GetDuration(name); d < 0 {
			return usagef("--%s: %s is negative", name, d)
		}
	}
	// The first that fails is the error, in this order.
	for _, c := range []struct {
		bad bool
		msg string
	}{
		{o.debounceMaxDelay > 0 && o.debounceMaxDelay < o.debounce,
			fmt.Sprintf("--debounce-max-delay (%s) is shorter than --debounce (%s)", o.debounceMaxDelay, o.debounce)},
		{o.overwriteBackoff == 0, "--overwrite-backoff must be positive"},
		{o.overwriteMax < o.overwriteBackoff, fmt.Sprintf(
			"--overwrite-backoff-max (%s) is shorter than --overwrite-backoff (%s)", o.overwriteMax, o.overwriteBackoff)},
		{o.timeout == 0, "--timeout must be positive"},
		{!(o.publishRate > 0),
			fmt.Sprintf("--publish-rate: %v is not a positive number of writes per second", o.publishRate)},
		{o.publishBurst < 1, fmt.Sprintf("--publish-burst: %d is less than 1", o.publishBurst)},
		{o.netlinkRcvBuf < 0, fmt.Sprintf("--netlink-receive-buffer: %d is negative", o.netlinkRcvBuf)},
		// --explain explains a dry run's output, and -o formats only the explanation.
		{o.explain && !o.dryRun, "--explain needs --dry-run (it explains the addresses a dry run prints)"},
		{o.output != "text" && o.output != "json", fmt.Sprintf("--output: %q is not text or json", o.output)},
		{fs.Changed("output") && !o.explain, "--output formats --explain's output: add --explain (and --dry-run)"},
	} {
		if c.bad {
			return usageError{c.msg}
		}
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

// applyCompat collects the deprecation warnings and applies local-ccm's --reconcile-interval. pflag's
// own deprecation line goes to the discarded output: main logs these, in --log-format.
func (o *options) applyCompat(fs *pflag.FlagSet, r *rawFlags) error {
	fs.Visit(func(f *pflag.Flag) {
		if f.Deprecated != "" {
			o.deprecations = append(o.deprecations, fmt.Sprintf("--%s is deprecated, %s", f.Name, f.Deprecated))
		}
	})
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

// setLogLevel sets the level from --log-level, else from --v (verbosityLevel), and klog's verbosity.
func (o *options) setLogLevel(fs *pflag.FlagSet, r *rawFlags) error {
	if fs.Changed("v") {
		if r.v < 0 || r.v > 10 {
			return usagef("--v: %d is not a verbosity between 0 and 10", r.v)
		}
		o.verbosity = r.v
	}
	if err := o.logLevel.UnmarshalText([]byte(r.logLevel)); err != nil {
		return usagef("--log-level: %q is not one of debug, info, warn, error", r.logLevel)
	}
	if fs.Changed("v") && !fs.Changed("log-level") {
		o.logLevel = verbosityLevel(r.v)
	}
	return nil
}

// verbosityLevel is the slog level that shows klog's V(v) (which arrives as level -v) and
// nodeaddr's debug lines for v >= 1: info for 0, debug for 1 to 4, -v above (6: client-go's requests).
func verbosityLevel(v int) slog.Level {
	if v <= 0 {
		return slog.LevelInfo
	}
	return min(-slog.Level(v), slog.LevelDebug)
}

// migrationDoc is where every flag local-ccm takes and nodeaddr does not is explained.
const migrationDoc = `docs/upgrade.md, "Migrating from local-ccm"`

// localCCMHints are local-ccm's flags (its klog ones included) that nodeaddr does not take, with what
// to do instead: a DaemonSet carried over stops on them with more than "unknown flag". Names have
// dashes; localCCMHint accepts klog's underscores too.
var localCCMHints = map[string]string{
	"external-ip-subnet": "use --external-ip-cidrs=CIDR (the address in that subnet, on any interface) or an --external-ip-target routed through it",
	"logtostderr":        "nodeaddr always logs to stderr: drop it (--log-format=json for JSON)",
	"alsologtostderr":    "nodeaddr always logs to stderr: drop it",
	"stderrthreshold":    "nodeaddr always logs to stderr: drop it (--log-level sets the level)",
	"log-dir":            "nodeaddr logs only to stderr: drop it",
	"log-file":           "nodeaddr logs only to stderr: drop it",
	"log-file-max-size":  "nodeaddr logs only to stderr: drop it",
	"skip-headers":       "drop it (--log-format=json for structured lines)",
	"skip-log-headers":   "drop it (--log-format=json for structured lines)",
	"add-dir-header":     "drop it (--log-format=json for structured lines)",
	"one-output":         "drop it",
	"log-backtrace-at":   "drop it",
	"vmodule":            "use --v=N or --log-level (one level for the whole program)",
}

// localCCMHint is the message for a local-ccm flag written with dashes ("--" or "-"), else "".
func localCCMHint(dashes, name string) string {
	name, _, _ = strings.Cut(name, "=")
	hint, ok := localCCMHints[strings.ReplaceAll(name, "_", "-")]
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s%s: local-ccm's flag, not nodeaddr's: %s (%s)", dashes, name, hint, migrationDoc)
}

// flagMessage rewrites pflag's errors into "--name: problem" lines, as with the flag package before
// (scripts and docs quote them).
func flagMessage(fs *pflag.FlagSet, err error) string {
	var notExist *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	var required *pflag.ValueRequiredError
	switch {
	case errors.As(err, &invalid):
		return invalidValueMessage(invalid)
	case errors.As(err, &required):
		return "--" + required.GetFlag().Name + " needs a value"
	case errors.As(err, &notExist):
		dashes, name := "--", notExist.GetSpecifiedName()
		if short := notExist.GetSpecifiedShortnames(); short != "" {
			// -name: one dash, which the flag package accepted for long flags and pflag does not.
			dashes, name = "-", strings.SplitN(short, "=", 2)[0]
			if fs.Lookup(name) != nil {
				return fmt.Sprintf("-%s: long flags take two dashes: --%s", name, name)
			}
		}
		if hint := localCCMHint(dashes, name); hint != "" {
			return hint
		}
		return "unknown flag " + dashes + name
	}
	return err.Error()
}

// invalidValueHints are, per flag type, what a valid value is and a typical one.
var invalidValueHints = map[string][2]string{
	"duration": {"not a duration (a number with a unit: ms, s, m or h)", "10s"},
	"bool":     {"not true or false", "true"},
	"int":      {"not an integer", "1"},
	"float64":  {"not a number", "1"},
}

// invalidValueMessage names the flag, the value and what a valid one looks like, with an example:
// the flag's default, or a typical value when the default is zero.
func invalidValueMessage(invalid *pflag.InvalidValueError) string {
	f := invalid.GetFlag()
	msg := fmt.Sprintf("--%s: invalid value %q: ", f.Name, invalid.GetValue())
	if errors.Is(invalid, strconv.ErrRange) {
		return msg + "value out of range"
	}
	hint, ok := invalidValueHints[f.Value.Type()]
	if !ok {
		return msg + "parse error"
	}
	want, example := hint[0], hint[1]
	if d := f.DefValue; d != "" && d != "0" && d != "0s" && d != "false" {
		example = d
	}
	return fmt.Sprintf("%s%s, e.g. --%s=%s", msg, want, f.Name, example)
}
