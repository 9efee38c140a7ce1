package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// helpColumns is the width --help wraps flag descriptions to.
const helpColumns = 100

// namedFlagSets are the --help sections, in order, as k8s.io/component-base's cliflag.NamedFlagSets
// (not imported: these few lines do not justify the dependency).
type namedFlagSets struct {
	order []string
	sets  map[string]*pflag.FlagSet
}

// flagSet returns the section called name, created on first use.
func (g *namedFlagSets) flagSet(name string) *pflag.FlagSet {
	if g.sets == nil {
		g.sets = map[string]*pflag.FlagSet{}
	}
	if _, ok := g.sets[name]; !ok {
		g.order = append(g.order, name)
		g.sets[name] = pflag.NewFlagSet(name, pflag.ContinueOnError)
	}
	return g.sets[name]
}

// all is the one flag set the command line is parsed with: every section's flags (the same
// *pflag.Flag values, so what Parse sets the sections see). It prints nothing: parseFlags turns
// its errors into one line and prints --help itself.
func (g *namedFlagSets) all() *pflag.FlagSet {
	fs := pflag.NewFlagSet("nodeaddr", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	// Flags after the first argument that is not one are not parsed, as with the flag package:
	// nodeaddr takes no arguments, so the first one is the error.
	fs.SetInterspersed(false)
	for _, name := range g.order {
		fs.AddFlagSet(g.sets[name])
	}
	return fs
}

// printUsage writes --help: a heading, then one section per group as Kubernetes components do
// (cliflag.PrintSections). Deprecated flags are hidden, as pflag does; empty sections are skipped.
func (g *namedFlagSets) printUsage(w io.Writer) {
	fmt.Fprint(w, "Usage: nodeaddr [flags]\n\nKeeps this Node's status.addresses in step with the kernel.\n")
	for _, name := range g.order {
		if usage := g.sets[name].FlagUsagesWrapped(helpColumns); usage != "" {
			fmt.Fprintf(w, "\n%s flags:\n\n%s", name, usage)
		}
	}
	fmt.Fprint(w, helpExamples)
}

// helpExamples close --help: the common command lines, each one accepted as written (a test parses
// them, shell quotes removed). docs/configuration.md has the scenarios in full.
const helpExamples = `
Examples:

  # What nodeaddr would publish on this host, without a cluster: one JSON line, then exit.
  nodeaddr --dry-run --run-once

  # The same, with why each candidate address was chosen or dropped (-o json for JSON).
  nodeaddr --dry-run --run-once --explain

  # A DaemonSet's args: Kubernetes expands $(NODE_NAME), set from spec.nodeName.
  nodeaddr --node-name=$(NODE_NAME) --log-format=json

  # InternalIP from the route toward a private gateway, one target per family; ExternalIP unmanaged.
  nodeaddr --node-name=node-1 --internal-ip-target=10.0.0.1,fd00::1 --external-ip-target=none

  # InternalIP from the first matching subnet, on any interface; never from 10.9.0.0/16.
  nodeaddr --node-name=node-1 --internal-ip-cidrs='!10.9.0.0/16,10.0.0.0/8'

  # Reconcile the Node once with a kubeconfig's cluster and exit (0 on success, 1 on failure).
  nodeaddr --node-name=node-1 --kubeconfig=$HOME/.kube/config --run-once
`
