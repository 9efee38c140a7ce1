// Command nodeaddr keeps its own Node's status.addresses in step with the kernel: netlink events
// (watcher) trigger a debounced resolution (resolver) whose result is written to the Node with
// conflict-safe, rate-limited patches (publisher).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/metrics"
	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/watcher"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code (0 ok, 1 runtime failure, 2 usage).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
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
	for _, d := range o.deprecations {
		log.Warn(d)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := (&agent{opts: o, log: log, stdout: stdout}).run(ctx); err != nil {
		log.Error("nodeaddr failed", "err", err)
		return 1
	}
	return 0
}

type agent struct {
	opts   *options
	log    *slog.Logger
	stdout io.Writer
}

func (a *agent) run(ctx context.Context) error {
	o := a.opts
	policy := o.policy()
	// The provided-node-ip check needs the host's addresses; only InternalIP honours it.
	policy.ReportLocal = !o.dryRun && slices.Contains(policy.Managed, resolver.InternalIP)
	var client *kubeClient
	var reviewer metrics.Reviewer
	scheme := kubeScheme()
	if !o.dryRun {
		cfg, err := restConfig(o.kubeconfig)
		if err != nil {
			return err
		}
		cfg.UserAgent = "nodeaddr/" + version
		if client, err = newKubeClient(cfg, scheme); err != nil {
			return err
		}
		if reviewer, err = newReviewClient(cfg); err != nil {
			return err
		}
	}
	m := metrics.New(version, revision)
	if client != nil {
		m.RegisterClientMetrics() // rest_client_*: before the first request
	}

	var recorder record.EventRecorder
	if client != nil {
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(events{client})
		defer b.Shutdown()
		recorder = b.NewRecorder(scheme, corev1.EventSource{Component: "nodeaddr", Host: o.nodeName})
	}
	var pub *publisher.Publisher
	var setNode func(resolver.NodeView) // set once the loop exists; the publisher starts after
	if client != nil {
		pub = publisher.New(publisher.Config{
			NodeName: o.nodeName, Nodes: client, Managed: o.managed(), RemoveTaint: o.removeTaint,
			Annotations: o.annotations, KeepExternalEqualInternal: o.keepExternalEqualInternal,
			Rate: rate.Limit(o.publishRate), Burst: o.publishBurst, Recorder: recorder,
			Logger: a.log, Observer: m,
			OverwriteBackoff: o.overwriteBackoff, OverwriteBackoffMax: o.overwriteMax,
			OnNode: func(v resolver.NodeView) {
				if setNode != nil {
					setNode(o.nodeView(v))
				}
			},
		})
	}

	if o.runOnce {
		return a.runOnce(ctx, policy, pub)
	}

	sig := watcher.NewSignal()
	w := watcher.New(watcher.Config{ReceiveBufferSize: o.netlinkRcvBuf, Logger: a.log, Observer: m}, sig)
	var sink resolver.Sink = pub
	var dry *dryRunSink
	if o.dryRun {
		dry = &dryRunSink{w: a.stdout, annotations: o.annotations, keepExternalEqual: o.keepExternalEqualInternal}
		sink = dry
	}
	loop := resolver.NewLoop(resolver.LoopConfig{
		Kernel: resolver.Netlink{}, Managed: o.managed(), Targets: o.targets(), Policy: policy,
		Debounce: o.debounce, MaxDelay: o.debounceMaxDelay, RemovalGrace: o.removalGrace,
		ResyncInterval: o.resyncInterval, OnRouteTables: w.SetRouteTables, AwaitNode: pub != nil,
		Logger: a.log, Observer: m,
	}, sig, sink)

	setNode = loop.SetNode
	srv := &metrics.Server{
		MetricsAddr: o.metricsAddr, ProbeAddr: o.probeAddr, Metrics: m, Logger: a.log,
		Healthz: func() error {
			if !w.Healthy() {
				return errors.New("netlink subscriptions not established")
			}
			if o.resyncInterval > 0 {
				if idle := time.Since(loop.LastTurn()); idle > 3*o.resyncInterval+10*time.Second {
					return fmt.Errorf("resolver loop idle for %s", idle.Round(time.Second))
				}
			}
			return nil
		},
		Readyz: func() error {
			if dry != nil {
				if !dry.ready() {
					return errors.New("no resolution yet")
				}
				return nil
			}
			if !pub.Ready() {
				return errors.New("node not reconciled")
			}
			return nil
		},
	}
	if o.dryRun && o.metricsSecure && enabledAddr(o.metricsAddr) {
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
		"probes", srv.ProbeAddr)

	var wg sync.WaitGroup
	var pubErr error
	wg.Go(func() { w.Run(ctx) })
	wg.Go(func() { loop.Run(ctx) })
	if pub != nil {
		wg.Go(func() {
			if err := pub.Run(ctx); err != nil && ctx.Err() == nil {
				pubErr = err
				cancel()
			}
		})
	}
	serveErr := serve()
	wg.Wait()
	a.log.Info("nodeaddr stopped")
	return errors.Join(pubErr, serveErr)
}

// runOnce resolves once and prints the result (--dry-run) or reconciles the Node with it, retrying
// until --timeout.
func (a *agent) runOnce(ctx context.Context, policy resolver.Policy, pub *publisher.Publisher) error {
	o := a.opts
	resolve := func(v resolver.NodeView) (resolver.State, error) {
		v = o.nodeView(v)
		st, _, err := resolver.ResolvePolicy(resolver.Netlink{}, policy.Excluding(v.PodCIDRs),
			resolver.State{Managed: o.managed(), Addresses: v.Addresses})
		return st, err
	}
	if pub == nil { // --dry-run
		st, err := resolve(resolver.NodeView{})
		if err != nil {
			return err
		}
		(&dryRunSink{w: a.stdout, annotations: o.annotations, keepExternalEqual: o.keepExternalEqualInternal}).Publish(st, time.Time{})
		return nil
	}
	tctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("--timeout %s elapsed", o.timeout))
	defer cancel()
	st, err := pub.ReconcileOnce(tctx, resolve)
	if err != nil {
		return fmt.Errorf("reconcile node %q: %w", o.nodeName, err)
	}
	a.log.Info("node reconciled", "node", o.nodeName, "addresses", st.String())
	return nil
}

// restConfig loads --kubeconfig (or $KUBECONFIG, which may list several files), else the in-cluster
// configuration.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig or KUBECONFIG and not running in a cluster: %w", err)
		}
		return cfg, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(kubeconfig)}
	if len(rules.Precedence) == 1 {
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// dryRunSink prints one JSON line per change of the managed addresses (and of the annotations
// that --annotations would write).
type dryRunSink struct {
	w           io.Writer
	annotations []publisher.AnnotationSpec
	// keepExternalEqual is --external-ip-equal-internal=keep.
	keepExternalEqual bool
	mu                sync.Mutex
	last              *resolver.State
}

type jsonAddress struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

func (d *dryRunSink) Publish(s resolver.State, _ time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last != nil && d.last.Equal(s) {
		return
	}
	d.last = &s
	out := struct {
		Addresses   []jsonAddress     `json:"addresses"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}{Addresses: []jsonAddress{}}
	merged := publisher.Compose(nil, s.Managed, s.Addresses, d.keepExternalEqual)
	for _, a := range merged {
		out.Addresses = append(out.Addresses, jsonAddress{Type: string(a.Type), Address: a.Address})
	}
	if len(d.annotations) > 0 {
		// What would be written to a Node without annotations; an empty value is a removal.
		out.Annotations = map[string]string{}
		for k, v := range publisher.AnnotationChanges(nil, d.annotations, publisher.InStatusOrder(merged, s.Managed, s.Addresses)) {
			out.Annotations[k] = v
		}
	}
	b, _ := json.Marshal(out)
	fmt.Fprintf(d.w, "%s\n", b)
}

func (d *dryRunSink) ready() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last != nil
}
