// Command kubectl-nodeaddr is the `kubectl nodeaddr` plugin: what nodeaddr published on each Node
// (status) and what in the cluster still names an address a Node no longer has (stale). It runs with
// the operator's own credentials, so the agent's rights stay as narrow as they are.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodeaddr/nodeaddr/internal/inspect"
)

// version and revision are stamped by `make build`, like nodeaddr's.
var (
	version  = "dev"
	revision = "unknown"
)

// Exit codes, the same for every command, so that a script tells "stale" from "cannot tell"
// (docs/plugin-reference.md, "Exit status", and exitStatusHelp). kubectl exits 1 for any error; a
// gate such as `until kubectl nodeaddr stale; do sleep 10; done` would then wait forever on a broken
// kubeconfig. exitCannotTell is also for output that could not be written.
const (
	exitOK         = 0
	exitStale      = 1
	exitUsage      = 2
	exitCannotTell = 3
)

const exitStatusHelp = `Exit status: 0 done (stale: nothing is stale), 1 something is stale (stale only), 2 a usage error,
3 the cluster could not be read (no kubeconfig, API server unreachable, unauthorized, forbidden, a
named Node not found): the command cannot tell.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	klog.Flush()
	os.Exit(code)
}

// options are the flags every subcommand shares.
type options struct {
	config    *genericclioptions.ConfigFlags
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
	return exitCannotTell
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
certificatesigningrequests; stale, while a kubelet-serving CSR is pending: get services and list
servicecidrs, as the CSR approver reads them; explain: get pods/log when no Event explains). -v=6 logs each API request, as kubectl does.

` + exitStatusHelp,
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
	root.PersistentFlags().AddFlagSet(klogFlags())
	root.PersistentFlags().BoolVar(&o.noHeaders, "no-headers", false, "Don't print headers in the default, wide and custom-columns output.")
	root.PersistentFlags().StringVar(&o.selector, "agent-selector", inspect.AgentSelector,
		"Label selector of nodeaddr's agent pods (the DaemonSet's selector), searched in every namespace unless -n is given.")
	root.AddCommand(newStatus(o), newStale(o), newExplain(o))
	return root
}

// klogFlags are kubectl's logging flags: -v (--v), klog's verbosity, through which client-go logs
// (6: each API request; 7: its headers; 8, 9: the response body), and --vmodule.
func klogFlags() *pflag.FlagSet {
	gfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(gfs)
	fs := pflag.NewFlagSet("klog", pflag.ContinueOnError)
	// klog's flags are global: a new command line starts from klog's defaults (tests run several).
	for name, value := range map[string]string{"v": "0", "vmodule": ""} {
		if err := gfs.Set(name, value); err != nil {
			panic(err)
		}
		fs.AddGoFlag(gfs.Lookup(name)) // a one-letter Go flag gets its shorthand: -v and --v
	}
	return fs
}

// clients builds the clientset, and the namespace to search agent pods in ("" unless -n was given).
func (o *options) clients() (kubernetes.Interface, string, error) {
	if err := kubeconfigExists(*o.config.KubeConfig, os.Getenv(clientcmd.RecommendedConfigPathEnvVar)); err != nil {
		return nil, "", err
	}
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

// kubeconfigExists fails when no file of KUBECONFIG exists: clientcmd (so kubectl) then only logs
// "Config not found: FILES" at -v=1 and goes on to http://localhost:8080, whose "connection refused"
// hides the cause. clientcmd already fails for a missing --kubeconfig; a KUBECONFIG list of which
// one file exists is merged as kubectl merges it.
func kubeconfigExists(explicit, env string) error {
	if explicit != "" {
		return nil // clientcmd's own check
	}
	var missing []string
	for _, f := range filepath.SplitList(env) {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); !errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		missing = append(missing, f)
	}
	if len(missing) > 0 {
		return clientcmd.MissingConfigError{Missing: missing}
	}
	return nil
}
