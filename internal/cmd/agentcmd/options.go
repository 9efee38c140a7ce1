package agentcmd

import (
	"errors"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
)

// options are the agent's parsed, validated flags: one section per --help section, each in its
// own file with its flags, their checks and what they configure (a new flag goes into one file).
type options struct {
	cli.Common        // --kubeconfig, --version (Node), --log-level, --log-format (Logging)
	nodeOptions       // Node: flags_node.go
	selectionOptions  // Address selection: flags_selection.go
	discovery         discoveryOptions // External address discovery: flags_discovery.go
	resolutionOptions // Resolution and Compatibility: flags_resolution.go
	publishOptions    // Publishing: flags_publishing.go
	listenerOptions   // Listeners: flags_listeners.go
	logOptions        // Logging: flags_logging.go
	check             checkOptions // Install check: check.go

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
	o.resolutionOptions.addCompatFlags(g.flagSet("Compatibility"))
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
	if err := o.publishOptions.parseAnnotations(o.managed()); err != nil {
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
		func() error { return o.nodeOptions.complete(hostname) },
	} {
		if err := check(); err != nil {
			return err
		}
	}
	o.applyDryRunListeners(fs, o.dryRun)
	return nil
}

// FlagSet is every flag of the agent, with defaults from getenv (the docs test reads them).
func FlagSet(getenv func(string) string) *pflag.FlagSet { return (&options{}).defineFlags(getenv).all() }
