package main

// `nodeaddr remediator`: evicts the hostNetwork pods a renumbering left on their Node's old address
// (internal/remediation), one leader-elected Deployment for the cluster
// (deploy/components/pod-remediation). Its own ServiceAccount: approving and evicting are separate
// rights, deployed separately. The wiring is this one file; the shared flags, listener and leader
// election are the approver's (approver.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/remediation"
	"github.com/nodeaddr/nodeaddr/internal/remediation/verdict"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/metrics"
)

// remediatorOptions are the remediator's flags.
type remediatorOptions struct {
	clusterOptions
	grace                   time.Duration
	maxPerNode, maxInFlight int
}

// parseRemediatorFlags parses the remediator's args; -h prints usage to out and returns pflag.ErrHelp.
func parseRemediatorFlags(args []string, getenv func(string) string, out io.Writer) (*remediatorOptions, error) {
	o := &remediatorOptions{}
	fs := pflag.NewFlagSet("nodeaddr remediator", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.addClusterFlags(fs, getenv, "nodeaddr-remediator", ":9814")
	fs.DurationVar(&o.grace, "grace", verdict.DefaultGrace, "how long a Node's new addresses must hold before its stale hostNetwork pods are evicted (a flap or a failover and back within it evicts nothing)")
	fs.IntVar(&o.maxPerNode, "max-evictions-per-node", 1, "evictions in flight (evicted, the pod not gone yet) on one Node at most")
	fs.IntVar(&o.maxInFlight, "max-evictions", 10, "evictions in flight in the cluster at most")
	help := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(args); err != nil {
		return nil, usagef("%v", err)
	}
	if *help {
		fmt.Fprintf(out, "Usage: nodeaddr remediator [flags]\n\nEvicts, through the Eviction API, the hostNetwork pods whose status.podIPs are no longer among their Node's addresses, so that their controllers create them on the new address (run once per cluster: deploy/components/pod-remediation).\n\nFlags:\n%s", fs.FlagUsages())
		return nil, pflag.ErrHelp
	}
	switch {
	case fs.NArg() > 0:
		return nil, usagef("unexpected arguments %q", fs.Args())
	case o.grace <= 0:
		return nil, usagef("--grace: %s is not a positive duration", o.grace)
	case o.maxPerNode < 1 || o.maxInFlight < 1:
		return nil, usagef("--max-evictions-per-node and --max-evictions must be at least 1")
	}
	return o, o.finish(getenv)
}

// runRemediator is `nodeaddr remediator`: exit code 0 ok, 1 runtime failure, 2 usage.
func runRemediator(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseRemediatorFlags(args, getenv, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodeaddr remediator: %v (see nodeaddr remediator --help)\n", err)
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, versionLine())
		return 0
	}
	log := newLogger(&options{logLevel: o.logLevel, logFormat: o.logFormat}, stderr)
	if err := o.run(ctx, log); err != nil {
		log.Error("nodeaddr remediator failed", "err", err)
		return 1
	}
	return 0
}

func (o *remediatorOptions) run(ctx context.Context, log *slog.Logger) error {
	cfg, err := restConfig(o.kubeconfig, "nodeaddr-remediator")
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 20, 40
	api, err := remediation.NewAPI(cfg, nil)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry(prometheus.Labels{"version": version, "revision": revision, "component": "remediator"})
	m := remediation.NewMetrics(reg)
	parent := ctx // the process's: SIGTERM ends it
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := record.NewBroadcaster(record.WithContext(parent), record.WithCorrelatorOptions(kube.CorrelatorOptions()))
	b.StartRecordingToSink(api.EventSink())
	defer b.Shutdown()
	ctrl, err := remediation.NewController(remediation.Config{
		Source: api.Source(), Metrics: m, Logger: log, Grace: o.grace, MaxPerNode: o.maxPerNode, MaxInFlight: o.maxInFlight,
		Recorder: b.NewRecorder(api.Scheme(), corev1.EventSource{Component: vocab.RemediatorEventComponent}),
	})
	if err != nil {
		return err
	}
	var leading atomic.Bool
	stop, err := o.serveProbes(reg, readiness(&leading, func() readier { return ctrl }), log, cancel)
	if err != nil {
		return err
	}
	defer stop()
	log.Info("nodeaddr remediator starting", "version", version, "revision", revision, "leader_elect", o.leaderElect,
		"lease", o.namespace+"/"+o.leaseName, "grace", o.grace, "max_evictions_per_node", o.maxPerNode,
		"max_evictions", o.maxInFlight, "bind_address", o.bindAddr)
	return o.elect(ctx, log, api.Lease(o.namespace, o.leaseName), &leading, m.Leader, ctrl.Run, cancel)
}
