package agentcmd

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
)

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
