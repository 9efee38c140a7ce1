// Command nodeaddr keeps its own Node's status.addresses in step with the kernel: netlink events
// (watcher) trigger a debounced resolution (resolver) whose result is written to the Node with
// conflict-safe, rate-limited patches (publisher).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/nodeaddr/nodeaddr/internal/agent"
	"github.com/nodeaddr/nodeaddr/internal/inspect"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/metrics"
	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/resolver/discovery"
	"github.com/nodeaddr/nodeaddr/watcher"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code (0 ok, 1 runtime failure, 2 usage).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 && args[0] == "approver" {
		return runApprover(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "remediator" {
		return runRemediator(ctx, args[1:], getenv, stdout, stderr)
	}
	o, err := parseFlags(args, getenv, os.Hostname, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodeaddr: %v (see --help)\n", err)
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, versionLine())
		return 0
	}
	log := newLogger(o, stderr)
	for _, d := range append(o.deprecations, o.warnings...) {
		log.Warn(d)
	}
	c := &command{opts: o, log: log, stdout: stdout}
	runMode, failed := c.run, "nodeaddr failed"
	if o.check.enabled {
		runMode, failed = c.runCheck, "nodeaddr --check-install failed"
	}
	if err := runMode(ctx); err != nil {
		log.Error(failed, "err", err)
		return 1
	}
	return 0
}

// command is one run of the nodeaddr command: the parsed flags and where it writes.
type command struct {
	opts   *options
	log    *slog.Logger
	stdout io.Writer
}

// run builds the clients and the agent and runs it once (--run-once) or beside the listeners.
func (a *command) run(ctx context.Context) error {
	o := a.opts
	var client *kube.Client
	var reviewer metrics.Reviewer
	scheme := kube.Scheme()
	if !o.dryRun {
		cfg, err := restConfig(o.kubeconfig, "nodeaddr")
		if err != nil {
			return err
		}
		if client, err = kube.NewClient(cfg, scheme); err != nil {
			return err
		}
		if reviewer, err = newReviewClient(cfg, o.audiences()...); err != nil {
			return err
		}
		a.addServiceNetwork(ctx, client)
	}
	m := metrics.New(version, revision)
	cfg := a.config(m.Registry)
	a.warnCIDRMisses(cfg.Loop.Kernel)
	if client != nil {
		m.RegisterClientMetrics() // rest_client_*: before the first request
		b := record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(kube.CorrelatorOptions()))
		b.StartRecordingToSink(client.EventSink())
		defer b.Shutdown()
		cfg.Nodes = client
		cfg.Publisher.Recorder = b.NewRecorder(scheme, corev1.EventSource{Component: vocab.EventComponent, Host: o.nodeName})
	}
	watcherMetrics := watcher.NewMetrics(m.Registry)
	if !o.runOnce {
		cfg.Watcher = &watcher.Config{ReceiveBufferSize: o.netlinkRcvBuf, Logger: a.log, Metrics: watcherMetrics}
	}
	ag, err := agent.New(cfg)
	if err != nil {
		return err
	}
	if o.runOnce {
		return a.runOnce(ctx, ag)
	}
	return a.serve(ctx, ag, m, reviewer)
}

// addServiceNetwork adds the cluster's Service network (ServiceCIDRs, the kubernetes Service's
// ClusterIPs), read once at start, to --service-cidr's exclusions: a Service address on a host
// interface must never become the Node's. Unreadable, the flag alone excludes, with a warning.
func (a *command) addServiceNetwork(ctx context.Context, client *kube.Client) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cluster, err := client.ServiceNetwork(ctx)
	if err != nil {
		a.log.Warn("the cluster's Service network could not be read: only --service-cidr keeps Service addresses off the Node", "err", err)
	}
	for _, p := range cluster {
		if !slices.Contains(a.opts.serviceCIDRs, p) {
			a.opts.serviceCIDRs = append(a.opts.serviceCIDRs, p)
		}
	}
}

// serve runs the agent beside the metrics and probe listeners until ctx ends or either fails.
func (a *command) serve(ctx context.Context, ag *agent.Agent, m *metrics.Metrics, reviewer metrics.Reviewer) error {
	o := a.opts
	srv := &metrics.Server{
		MetricsAddr: o.metricsAddr, ProbeAddr: o.probeAddr, Metrics: m, Logger: a.log,
		Healthz: ag.Healthz, Readyz: ag.Readyz,
	}
	if o.dryRun && o.metricsSecure && metrics.Enabled(o.metricsAddr) {
		a.log.Warn("/metrics disabled: --dry-run has no API server to check scrapers' tokens; use --metrics-secure=false with a loopback --metrics-bind-address")
		srv.MetricsAddr = ""
	}
	if err := o.metricsServer(o.nodeName, reviewer, m, srv); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serve, err := srv.Listen(ctx)
	if err != nil {
		return err
	}
	a.log.Info("nodeaddr starting", "version", version, "revision", revision, "node", o.nodeName, "dry_run", o.dryRun,
		"managed", fmt.Sprint(o.managed()), "targets", fmt.Sprint(o.targets()),
		"allow_secondary", o.allowSecondary, "default_exclusions", o.defaultExclusions,
		"service_cidrs", fmt.Sprint(o.serviceCIDRs), "metrics", srv.MetricsAddr, "metrics_secure", srv.MetricsAuth != nil,
		"probes", srv.ProbeAddr, "external_ip_discovery", o.discovery.raw)
	o.logEffectiveConfig(a.log)
	var agentErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if agentErr = ag.Run(ctx); agentErr != nil {
			cancel()
		}
	}()
	serveErr := serve()
	<-done
	a.log.Info("nodeaddr stopped")
	return errors.Join(agentErr, serveErr)
}

// config is the agent's assembly from the flags; the caller adds the clients. Each stage registers
// its metrics on reg, discovery's even when it is off (its rounds exist at 0 for the alert).
func (a *command) config(reg prometheus.Registerer) agent.Config {
	o := a.opts
	policy := o.policy()
	// The provided-node-ip check needs the host's addresses; only InternalIP honours it.
	policy.ReportLocal = !o.dryRun && slices.Contains(policy.Managed, resolver.InternalIP)
	return agent.Config{
		NodeName: o.nodeName,
		Publisher: publisher.Config{
			RemoveTaint: o.removeTaint,
			Annotations: o.annotations, Rate: rate.Limit(o.publishRate), Burst: o.publishBurst,
			Logger: a.log, Metrics: publisher.NewMetrics(reg),
			OverwriteBackoff: o.overwriteBackoff, OverwriteBackoffMax: o.overwriteMax,
		},
		Loop: resolver.LoopConfig{
			Kernel: resolver.Netlink{}, Policy: policy,
			Debounce: o.debounce, LinkDebounce: o.linkDebounce, MaxDelay: o.debounceMaxDelay, RemovalGrace: o.removalGrace,
			ResyncInterval: o.resyncInterval, Logger: a.log, Metrics: resolver.NewMetrics(reg),
		},
		AllowPodCIDRs: !o.defaultExclusions,
		DryRun:        a.stdout,
		Explain:       o.explain, ExplainJSON: o.output == "json",
		Discovery: o.discovery.agentConfig(a.log, discovery.NewMetrics(reg)),
		Registry:  reg,
	}
}

// runOnce prints one resolution (--dry-run) or reconciles the Node with it, retrying until --timeout.
func (a *command) runOnce(ctx context.Context, ag *agent.Agent) error {
	o := a.opts
	o.logEffectiveConfig(a.log)
	if o.dryRun {
		_, err := ag.RunOnce(ctx)
		return err
	}
	tctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("--timeout %s elapsed", o.timeout))
	defer cancel()
	st, err := ag.RunOnce(tctx)
	if err != nil {
		return fmt.Errorf("reconcile node %q: %w", o.nodeName, err)
	}
	a.log.Info("node reconciled", "node", o.nodeName, "addresses", st.String())
	return nil
}

// restConfig loads --kubeconfig (or $KUBECONFIG: several files), else the in-cluster configuration,
// with the User-Agent component/version.
func restConfig(kubeconfig, component string) (cfg *rest.Config, err error) {
	if kubeconfig == "" {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("no --kubeconfig or KUBECONFIG and not running in a cluster: %w", err)
		}
	} else {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(kubeconfig)}
		if len(rules.Precedence) == 1 {
			rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
		}
		loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		if cfg, err = loader.ClientConfig(); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
	}
	cfg.UserAgent = component + "/" + version
	return cfg, nil
}

// newLogger is the process's logger: --log-format's handler at --log-level (or what --v maps to),
// with klog (client-go) routed into it at verbosity --v.
func newLogger(o *options, w io.Writer) *slog.Logger {
	hopts := &slog.HandlerOptions{Level: o.logLevel}
	var h slog.Handler = slog.NewTextHandler(w, hopts)
	if o.logFormat == "json" {
		h = slog.NewJSONHandler(w, hopts)
	}
	log := slog.New(h)
	// client-go logs through klog: one handler, one format. klog's V(n) arrives as level -n, gated
	// first by klog's verbosity (which decides at client construction whether requests are traced).
	klog.SetSlogLogger(log)
	setKlogVerbosity(o.verbosity)
	return log
}

// setKlogVerbosity sets klog's global -v, through its own flag as Kubernetes components do.
func setKlogVerbosity(v int) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", strconv.Itoa(v)); err != nil {
		panic(err) // v is 0-10, checked by parseFlags
	}
}

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
	cfg, err := restConfig(a.opts.kubeconfig, "nodeaddr-check")
	if err != nil {
		return err
	}
	client, err := kube.NewClient(cfg, kube.Scheme())
	if err != nil {
		return err
	}
	return checkInstall(ctx, client, a.opts.check, a.opts.timeout, 2*time.Second, a.stdout)
}
