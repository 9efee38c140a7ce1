package main

// --check-install: the chart's `helm test`, a mode of the binary as the image holds nothing else. It
// judges the Nodes and agent pods with internal/inspect, with the hook's read-only ServiceAccount.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeaddr/nodeaddr/internal/inspect"
	"github.com/nodeaddr/nodeaddr/internal/kube"
)

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

// validate refuses selectors the API server would refuse, as a usage error.
func (c checkOptions) validate() error {
	for _, s := range []struct{ flag, v string }{{"check-agent-selector", c.agentSelector}, {"check-node-selector", c.nodeSelector}} {
		if _, err := labels.Parse(s.v); err != nil {
			return usagef("--%s: %v", s.flag, err)
		}
	}
	return nil
}

// checkInstall judges the install every interval until it passes or timeout ends, then prints the
// last verdict, one line per Node, to out. It fails when the verdict is not OK.
func checkInstall(ctx context.Context, l installLister, c checkOptions, timeout, interval time.Duration, out io.Writer) error {
	var verdict inspect.InstallCheck
	var err error
	if wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		verdict, err = judge(ctx, l, c)
		return err == nil && verdict.OK, nil
	}) != nil {
		return checkFailure(verdict, err, timeout, out)
	}
	fmt.Fprintln(out, strings.Join(verdict.Lines, "\n"))
	fmt.Fprintf(out, "nodeaddr install check passed: %d Node(s)\n", len(verdict.Lines))
	return nil
}

func checkFailure(verdict inspect.InstallCheck, err error, timeout time.Duration, out io.Writer) error {
	if err != nil {
		return fmt.Errorf("install check: %w (still failing after %s)", err, timeout)
	}
	fmt.Fprintln(out, strings.Join(verdict.Lines, "\n"))
	failed := 0
	for _, l := range verdict.Lines {
		if !strings.Contains(l, ": ok: ") {
			failed++
		}
	}
	return fmt.Errorf("install check failed after %s: %d of %d line(s) not ok", timeout, failed, len(verdict.Lines))
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
	cfg, err := restConfig(a.opts.kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "nodeaddr-check/" + version
	client, err := kube.NewClient(cfg, kube.Scheme())
	if err != nil {
		return err
	}
	return checkInstall(ctx, client, a.opts.check, a.opts.timeout, 2*time.Second, a.stdout)
}
