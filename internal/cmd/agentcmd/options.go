package agentcmd

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
)

// options are the agent's parsed, validated flags: one section per --help section, each in its
// own file with its flags, their checks and what they configure (a new flag goes into one file).
type options struct {
	cli.Common                         // --kubeconfig, --version (Node), --log-level, --log-format (Logging)
	nodeOptions                        // Node: below
	selectionOptions                   // Address selection: flags_selection.go
	discovery         discoveryOptions // External address discovery: flags_discovery.go
	resolutionOptions                  // Resolution and Compatibility: flags_resolution.go
	publishOptions                     // Publishing: flags_publishing.go
	listenerOptions                    // Listeners: flags_listeners.go
	logOptions                         // Logging: below
	check             checkOptions     // Install check: check.go

	deprecations []string
	warnings     []string // about a valid combination of flags likely not meant
}

// defineFlags declares every flag, grouped into the --help sections, in their order. Defaults from
// getenv: NODE_NAME (the DaemonSet sets it from spec.nodeName), NODEADDR_ANNOTATIONS and
// POD_NAMESPACE (the chart's test pod sets it).
func (o *options) defineFlags(getenv func(string) string) *namedFlagSets {
	g := &namedFlagSets{}
	fs := g.flagSet("Node")
	o.nodeOptions.addFlags(fs, getenv)
	o.AddKubeconfig(fs, cli.AgentWording)
	o.AddVersion(fs)
	o.selectionOptions.addFlags(g.flagSet("Address selection")) // docs/configuration.md, "Selection policy"
	o.discovery.addFlags(g.flagSet("External address discovery"))
	o.resolutionOptions.addFlags(g.flagSet("Resolution"))
	o.publishOptions.addFlags(g.flagSet("Publishing"), getenv)
	o.listenerOptions.addFlags(g.flagSet("Listeners"))
	fs = g.flagSet("Logging")
	o.AddLogging(fs, cli.AgentWording)
	o.logOptions.addFlags(fs)
	o.check.addFlags(g.flagSet("Install check"), getenv)
	o.addCompatFlags(g.flagSet("Compatibility"))
	return g
}

// parseFlags parses args (without the program name). getenv supplies NODE_NAME, KUBECONFIG and
// NODEADDR_ANNOTATIONS; hostname the dry-run default node name. -h/--help returns pflag.ErrHelp
// after printing usage to out.
func parseFlags(args []string, getenv func(string) string, hostname func() (string, error), out io.Writer) (*options, error) {
	o := &options{}
	groups := o.defineFlags(getenv)
	fs := groups.all()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) { // -h or -help, which pflag answers itself
			groups.printUsage(out)
			return nil, err
		}
		// One line, whatever the user typed: a flag name may contain a newline.
		return nil, cli.UsageError{Msg: strings.ReplaceAll(flagMessage(fs, err), "\n", `\n`)}
	}
	if o.help {
		groups.printUsage(out)
		return nil, pflag.ErrHelp
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("unexpected argument %q: nodeaddr takes only flags", fs.Arg(0))
	}
	if o.Version {
		return o, nil
	}
	o.Complete(getenv)
	if o.check.enabled { // a mode of its own: no Node, no kernel, no selection policy
		return o, o.check.validate(fs, &o.nodeOptions)
	}
	if err := o.validate(fs, hostname); err != nil {
		return nil, err
	}
	return o, nil
}

// validate checks each section, in --help's order but for the selection first (the others read
// what it manages), and collects the deprecation warnings (main logs them, in --log-format).
func (o *options) validate(fs *pflag.FlagSet, hostname func() (string, error)) error {
	var err error
	if o.warnings, err = o.selectionOptions.validate(fs); err != nil {
		return err
	}
	if err := o.parseAnnotations(o.managed()); err != nil {
		return err
	}
	fs.Visit(func(f *pflag.Flag) {
		if f.Deprecated != "" {
			o.deprecations = append(o.deprecations, "--"+f.Name+" is deprecated, "+f.Deprecated)
		}
	})
	for _, check := range []func() error{
		func() error { return o.resolutionOptions.validate(fs) },
		func() error { return o.publishOptions.validate(fs) },
		func() error { return o.nodeOptions.validate(fs) },
		func() error { return o.logOptions.validate(fs, &o.Common) },
		func() error { return o.listenerOptions.validate() },
		o.discovery.validate,
		func() error { o.restrictScope(len(o.discovery.servers) > 0); return nil },
		func() error { return o.complete(hostname) },
	} {
		if err := check(); err != nil {
			return err
		}
	}
	o.applyDryRunListeners(fs, o.dryRun)
	return nil
}

// FlagSet is every flag of the agent, with defaults from getenv (the docs test reads them).
func FlagSet(getenv func(string) string) *pflag.FlagSet {
	return (&options{}).defineFlags(getenv).all()
}

// nodeOptions are the Node section's flags (besides --kubeconfig and --version, cli.Common's):
// which Node, and how this run goes.
type nodeOptions struct {
	nodeName        string
	runOnce, dryRun bool
	timeout         time.Duration
	explain         bool   // why each address was chosen or dropped (dry run only)
	output          string // -o: the explanation's format, text or json
	help            bool   // --help (-h and -help are pflag's ErrHelp)
}

func (n *nodeOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	fs.StringVar(&n.nodeName, "node-name", getenv("NODE_NAME"), "name of the Node to manage (env NODE_NAME; required unless --dry-run)")
	fs.BoolVar(&n.runOnce, "run-once", false, "reconcile once and exit (0 on success, 1 on failure)")
	fs.DurationVar(&n.timeout, "timeout", 30*time.Second, "with --run-once: how long to wait for the Node and retry; with --check-install: how long the install may take to pass")
	fs.BoolVar(&n.dryRun, "dry-run", false, "print the desired addresses as JSON lines on stdout instead of writing the Node; needs no cluster, and opens a listener only when its bind-address flag is given")
	fs.BoolVar(&n.explain, "explain", false, "with --dry-run: print why each address was chosen or dropped before each JSON line")
	fs.StringVarP(&n.output, "output", "o", "text", "with --explain: the explanation's format, text or json")
	// --help is a flag of its own, hidden from the list, so that --help=false means false: pflag's
	// built-in help answers --help whatever its value. -h and -help stay pflag's (parseFlags).
	fs.BoolVar(&n.help, "help", false, "print this help and exit")
	_ = fs.MarkHidden("help")
}

func (n *nodeOptions) validate(fs *pflag.FlagSet) error {
	// The first that fails is the error, in this order.
	for _, c := range []struct {
		bad bool
		msg string
	}{
		{n.timeout < 0, "--timeout: " + n.timeout.String() + " is negative"},
		{n.timeout == 0, "--timeout must be positive"},
		// --explain explains a dry run's output, and -o formats only the explanation.
		{n.explain && !n.dryRun, "--explain needs --dry-run (it explains the addresses a dry run prints)"},
		{n.output != "text" && n.output != "json", fmt.Sprintf("--output: %q is not text or json", n.output)},
		{fs.Changed("output") && !n.explain, "--output formats --explain's output: add --explain (and --dry-run)"},
	} {
		if c.bad {
			return cli.UsageError{Msg: c.msg}
		}
	}
	return nil
}

// complete takes the hostname (lowercased, as the kubelet does) for a dry run without --node-name.
func (n *nodeOptions) complete(hostname func() (string, error)) error {
	if n.nodeName = strings.TrimSpace(n.nodeName); n.nodeName != "" {
		return nil
	}
	if !n.dryRun {
		return cli.Usagef("--node-name (or NODE_NAME) is required")
	}
	h, err := hostname()
	if err != nil {
		return cli.Usagef("--node-name not set and the hostname is unknown: %v", err)
	}
	n.nodeName = strings.ToLower(h)
	return nil
}

// logOptions are the Logging section's own flag (--log-level and --log-format are cli.Common's).
type logOptions struct {
	v         int // --v as given
	verbosity int // klog's verbosity (client-go logs its requests at 6)
}

func (l *logOptions) addFlags(fs *pflag.FlagSet) {
	// -v=N and --v=N, as klog's flag in Kubernetes components (and local-ccm).
	fs.IntVarP(&l.v, "v", "v", 0, "verbosity 0-10 (local-ccm's --v), used when --log-level is not set: 0 info, 1-4 debug, N above 4 also client-go's V(N) logs (6: each API request)")
}

// validate sets the level from --log-level, else from --v (verbosityLevel), and klog's verbosity.
func (l *logOptions) validate(fs *pflag.FlagSet, c *cli.Common) error {
	if fs.Changed("v") {
		if l.v < 0 || l.v > 10 {
			return cli.Usagef("--v: %d is not a verbosity between 0 and 10", l.v)
		}
		l.verbosity = l.v
	}
	if err := c.ValidateLogging(); err != nil {
		return err
	}
	if fs.Changed("v") && !fs.Changed("log-level") {
		c.LogLevel = verbosityLevel(l.v)
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
