package agentcmd

// --help and the command line's errors: the sections, the examples, and pflag's errors as one line.

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// helpColumns is the width --help wraps flag descriptions to.
const helpColumns = 100

// namedFlagSets are the --help sections, in order, as k8s.io/component-base's cliflag.NamedFlagSets
// (not imported: these few lines do not justify the dependency).
type namedFlagSets struct{ sets []*pflag.FlagSet }

// flagSet returns a new section called name.
func (g *namedFlagSets) flagSet(name string) *pflag.FlagSet {
	g.sets = append(g.sets, pflag.NewFlagSet(name, pflag.ContinueOnError))
	return g.sets[len(g.sets)-1]
}

// all is the flag set the command line is parsed with, sharing the sections' *pflag.Flag values. It
// prints nothing: parseFlags turns its errors into one line and prints --help itself.
func (g *namedFlagSets) all() *pflag.FlagSet {
	fs := pflag.NewFlagSet("nodeaddr", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	// Flags after the first argument that is not one are not parsed, as with the flag package:
	// nodeaddr takes no arguments, so the first one is the error.
	fs.SetInterspersed(false)
	for _, s := range g.sets {
		fs.AddFlagSet(s)
	}
	return fs
}

// printUsage writes --help: a heading, then the non-empty sections, as cliflag.PrintSections does.
func (g *namedFlagSets) printUsage(w io.Writer) {
	fmt.Fprint(w, "Usage: nodeaddr [flags]\n\nKeeps this Node's status.addresses in step with the kernel.\n")
	for _, s := range g.sets {
		if usage := s.FlagUsagesWrapped(helpColumns); usage != "" {
			fmt.Fprintf(w, "\n%s flags:\n\n%s", s.Name(), usage)
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
