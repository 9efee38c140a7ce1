// Command kubectl-nodeaddr is the `kubectl nodeaddr` plugin: what nodeaddr published on each Node
// (status) and what in the cluster still names an address a Node no longer has (stale). It runs with
// the operator's own credentials, so the agent's rights stay as narrow as they are.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeaddr/nodeaddr/internal/inspect"
)

// version and revision are stamped by `make build`, like nodeaddr's.
var (
	version  = "dev"
	revision = "unknown"
)

// Exit codes: stale's contract for scripts (0 nothing stale, 1 something stale or the cluster could
// not be read) and kubectl's for a command line it cannot parse.
const (
	exitOK    = 0
	exitFound = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the flags every subcommand shares.
type options struct {
	config    *genericclioptions.ConfigFlags
	output    string
	noHeaders bool
	selector  string
	stdout    io.Writer
	stderr    io.Writer
}

// usageError is a command line that cannot run: exit 2, and kubectl's pointer to the help.
type usageError struct {
	err error
	cmd *cobra.Command
}

func (e usageError) Error() string { return e.err.Error() }

// exitCode lets a command that ran end with a code other than 0 without an error (stale found).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &options{config: genericclioptions.NewConfigFlags(true), stdout: stdout, stderr: stderr}
	root := newRoot(o)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var code exitCode
	var usage usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "error: %v\nSee '%s -h' for help and examples\n", usage.err, usage.cmd.CommandPath())
		return exitUsage
	}
	fmt.Fprintln(stderr, errorLine(err))
	return exitFound
}

// errorLine is an error as kubectl prints it: "Error from server (Reason): …" for an API status,
// else "error: …".
func errorLine(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if reason := apierrors.ReasonForError(err); reason != "" {
			return fmt.Sprintf("Error from server (%s): %v", reason, err)
		}
		return fmt.Sprintf("Error from server: %v", err)
	}
	return fmt.Sprintf("error: %v", err)
}

func newRoot(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:   "nodeaddr",
		Short: "Inspect nodeaddr's Node addresses and what still names an old address",
		Long: `Inspect the Node addresses nodeaddr publishes.

 status  shows, for each Node, its addresses, who wrote them, when nodeaddr last did, whether the
         uninitialized taint is still there, the agent pod and nodeaddr's last Warning.
 stale   lists what still names an address a Node no longer has: hostNetwork pods, EndpointSlice
         endpoints, kubelet serving certificates and pending kubelet-serving CSRs.
 explain shows why a Node has its addresses, as its agent explained them at the last change.

It uses your kubeconfig and credentials (list nodes, pods, events, endpointslices and
certificatesigningrequests; explain: get pods/log).`,
		Version:       fmt.Sprintf("%s (revision %s)", version, revision),
		SilenceErrors: true,
		SilenceUsage:  true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl nodeaddr"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath()), cmd}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError{err, cmd} })
	o.config.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "", "Output format: one of (json, yaml, wide).")
	root.PersistentFlags().BoolVar(&o.noHeaders, "no-headers", false, "Don't print headers in the default and wide output.")
	root.PersistentFlags().StringVar(&o.selector, "agent-selector", inspect.AgentSelector,
		"Label selector of nodeaddr's agent pods (the DaemonSet's selector), searched in every namespace unless -n is given.")
	root.AddCommand(newStatus(o), newStale(o), newExplain(o))
	return root
}

// validateOutput rejects an -o value the command cannot print.
func (o *options) validateOutput(cmd *cobra.Command) error {
	switch o.output {
	case "", "wide", "json", "yaml":
		return nil
	}
	return usageError{fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json,wide,yaml", o.output), cmd}
}

// clients builds the clientset from the kubeconfig flags, and the namespace to search agent pods in
// ("" for every namespace unless -n was given).
func (o *options) clients() (kubernetes.Interface, string, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, "", err
	}
	cfg.UserAgent = "kubectl-nodeaddr/" + version
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	ns, explicit, err := o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil || !explicit {
		ns = ""
	}
	return cs, ns, err
}
