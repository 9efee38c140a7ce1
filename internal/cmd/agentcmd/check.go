package agentcmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/inspect"
	"github.com/nodeaddr/nodeaddr/internal/kube"
)

// --check-install: the chart's `helm test`, a mode of the binary as the image holds nothing else. It
// judges the Nodes and agent pods with internal/inspect, with the hook's read-only ServiceAccount.

// checkOptions are the flags of --check-install.
type checkOptions struct {
	enabled                                bool
	namespace, agentSelector, nodeSelector string // namespace "": every namespace
}

// installLister reads what the check judges (kube.Client; a fake clientset in tests).
type installLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error)
}

func (c *checkOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	fs.BoolVar(&c.enabled, "check-install", false, "check the install and exit (the chart's helm test): every selected Node has a ready agent pod and an InternalIP; 0 when it does within --timeout, else 1 with a line per Node; not with --dry-run or --run-once")
	fs.StringVar(&c.namespace, "check-namespace", getenv("POD_NAMESPACE"), "with --check-install: the agent pods' namespace (env POD_NAMESPACE; empty: every namespace)")
	fs.StringVar(&c.agentSelector, "check-agent-selector", inspect.AgentSelector, "with --check-install: label selector of the agent pods")
	fs.StringVar(&c.nodeSelector, "check-node-selector", "kubernetes.io/os=linux", "with --check-install: label selector of the Nodes the DaemonSet runs on (its nodeSelector)")
}

// validate refuses a flag of the agent's run (letting one win would run something not asked for),
// and selectors the API server would refuse, as a usage error.
func (c checkOptions) validate(fs *pflag.FlagSet, n *nodeOptions) error {
	for _, m := range []struct {
		flag string
		set  bool
		does string
	}{
		{"--dry-run", n.dryRun, "--dry-run prints this host's addresses without a cluster"},
		{"--run-once", n.runOnce, "--run-once reconciles this host's Node once"},
		{"--explain", n.explain, "--explain explains a --dry-run"},
		{"--output", fs.Changed("output"), "--output formats --explain's output"},
	} {
		if m.set {
			return cli.Usagef("--check-install and %s are different modes: --check-install checks the install in the cluster and exits, %s; run one at a time",
				m.flag, m.does)
		}
	}
	if n.timeout <= 0 {
		return cli.Usagef("--timeout must be positive")
	}
	for _, s := range []struct{ flag, v string }{{"check-agent-selector", c.agentSelector}, {"check-node-selector", c.nodeSelector}} {
		if _, err := labels.Parse(s.v); err != nil {
			return cli.Usagef("--%s: %v", s.flag, err)
		}
	}
	return nil
}

// checkInstall judges the install every interval until it passes or timeout ends, then prints the
// last verdict, one line per Node, to out. It fails when the verdict is not OK.
func checkInstall(ctx context.Context, l installLister, c checkOptions, timeout, interval time.Duration, out io.Writer) error {
	var verdict inspect.InstallCheck
	var err error
	failed := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		verdict, err = judge(ctx, l, c)
		return err == nil && verdict.OK, nil
	}) != nil
	if failed && err != nil {
		return fmt.Errorf("install check: %w (still failing after %s)", err, timeout)
	}
	fmt.Fprintln(out, strings.Join(verdict.Lines, "\n"))
	if !failed {
		fmt.Fprintf(out, "nodeaddr install check passed: %d Node(s)\n", len(verdict.Lines))
		return nil
	}
	notOK := 0
	for _, l := range verdict.Lines {
		if !strings.Contains(l, ": ok: ") {
			notOK++
		}
	}
	return fmt.Errorf("install check failed after %s: %d of %d line(s) not ok", timeout, notOK, len(verdict.Lines))
}

func judge(ctx context.Context, l installLister, c checkOptions) (inspect.InstallCheck, error) {
	nodes, err := l.List(ctx, metav1.ListOptions{LabelSelector: c.nodeSelector})
	if err != nil {
		return inspect.InstallCheck{}, fmt.Errorf("list nodes (selector %q): %w", c.nodeSelector, err)
	}
	pods, err := l.ListPods(ctx, c.namespace, metav1.ListOptions{LabelSelector: c.agentSelector})
	if err != nil {
		return inspect.InstallCheck{}, fmt.Errorf("list agent pods in namespace %q (selector %q): %w", c.namespace, c.agentSelector, err)
	}
	return inspect.CheckInstall(nodes.Items, pods.Items), nil
}

// runCheck is --check-install with the kubeconfig's or the in-cluster credentials.
func (a *command) runCheck(ctx context.Context) error {
	cfg, err := cli.RestConfig(a.opts.Kubeconfig, "nodeaddr-check", a.env.Version)
	if err != nil {
		return err
	}
	client, err := kube.NewClient(cfg, kube.Scheme())
	if err != nil {
		return err
	}
	return checkInstall(ctx, client, a.opts.check, a.opts.timeout, 2*time.Second, a.env.Stdout)
}
