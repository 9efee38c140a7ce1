// Package agentcmd is the agent, `nodeaddr` without a subcommand: its flags (options.go, one file
// per --help section), and the run that keeps its own Node's status.addresses in step with the
// kernel (internal/agent), or --run-once, --dry-run, --check-install.
package agentcmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/agent"
	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/metrics"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/resolver/discovery"
	"github.com/nodeaddr/nodeaddr/watcher"
)

// Main is the agent's command: exit code 0 ok, 1 runtime failure, 2 usage.
func Main(ctx context.Context, env cli.Env, args []string) int {
	o, err := parseFlags(args, env.Getenv, os.Hostname, env.Stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "nodeaddr: %v (see --help)\n", err)
		return 2
	}
	if o.Version {
		fmt.Fprintln(env.Stdout, env.VersionLine())
		return 0
	}
	log := cli.NewLogger(o.LogLevel, o.LogFormat, o.verbosity, env.Stderr)
	for _, d := range append(o.deprecations, o.warnings...) {
		log.Warn(d)
	}
	c := &command{opts: o, log: log, env: env}
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
	opts *options
	log  *slog.Logger
	env  cli.Env
}

// run builds the clients and the agent and runs it once (--run-once) or beside the listeners.
func (a *command) run(ctx context.Context) error {
	o := a.opts
	var client *kube.Client
	var reviewer metrics.Reviewer
	var rc *rest.Config // the apiserver target's kubeconfig server (apiserver.go)
	scheme := kube.Scheme()
	if !o.dryRun {
		cfg, err := cli.RestConfig(o.Kubeconfig, "nodeaddr", a.env.Version)
		if err != nil {
			return err
		}
		rc = cfg
		if client, err = kube.NewClient(cfg, scheme); err != nil {
			return err
		}
		if reviewer, err = newReviewClient(cfg, o.audiences()...); err != nil {
			return err
		}
		a.addServiceNetwork(ctx, client)
	}
	m := metrics.New(a.env.Version, a.env.Revision)
	cfg := a.config(m.Registry)
	var err error
	if cfg.APIServer, err = a.apiServerConfig(rc, client); err != nil {
		return err
	}
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
		cfg.Watcher = o.watcherConfig(a.log, watcherMetrics)
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
	a.log.Info("nodeaddr starting", "version", a.env.Version, "revision", a.env.Revision, "node", o.nodeName, "dry_run", o.dryRun,
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
		NodeName:      o.nodeName,
		Publisher:     o.publisherConfig(a.log, reg),
		Loop:          o.loopConfig(policy, a.log, reg),
		AllowPodCIDRs: !o.defaultExclusions,
		DryRun:        a.env.Stdout,
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
