package main

// `nodeaddr conflicts`: the cluster-wide address conflict detector (internal/conflicts), one
// leader-elected Deployment with its own ServiceAccount (deploy/components/address-conflicts). It
// shares the approver's flags and run loop (clusterOptions, runElected), not its rights.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/conflicts"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/metrics"
)

// conflictsOptions are the detector's flags.
type conflictsOptions struct {
	clusterOptions
	window time.Duration
}

// parseConflictsFlags parses the detector's args; -h prints usage to out and returns pflag.ErrHelp.
func parseConflictsFlags(args []string, getenv func(string) string, out io.Writer) (*conflictsOptions, error) {
	o := &conflictsOptions{}
	fs := pflag.NewFlagSet("nodeaddr conflicts", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.define(fs, getenv, "nodeaddr-conflicts", ":9814")
	fs.DurationVar(&o.window, "move-window", conflicts.DefaultWindow, "an address listed by two Nodes for less than this is a move, not a conflict (0 flags at once)")
	help := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(args); err != nil {
		return nil, usagef("%v", err)
	}
	if *help {
		fmt.Fprintf(out, "Usage: nodeaddr conflicts [flags]\n\nMarks every Node that lists an address another Node lists with the condition %s, a Warning Event naming the other Node and a metric; clears it when the conflict ends (run once per cluster: deploy/components/address-conflicts).\n\nFlags:\n%s",
			vocab.ConditionAddressConflict, fs.FlagUsages())
		return nil, pflag.ErrHelp
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected arguments %q", fs.Args())
	}
	if o.window < 0 {
		return nil, usagef("--move-window: %v is negative", o.window)
	}
	return o, o.complete(getenv)
}

// runConflicts is `nodeaddr conflicts`: exit code 0 ok, 1 runtime failure, 2 usage.
func runConflicts(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseConflictsFlags(args, getenv, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodeaddr conflicts: %v (see nodeaddr conflicts --help)\n", err)
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, versionLine())
		return 0
	}
	log := newLogger(&options{logLevel: o.logLevel, logFormat: o.logFormat}, stderr)
	if err := o.run(ctx, log); err != nil {
		log.Error("nodeaddr conflicts failed", "err", err)
		return 1
	}
	return 0
}

func (o *conflictsOptions) run(ctx context.Context, log *slog.Logger) error {
	cfg, err := restConfig(o.kubeconfig, "nodeaddr-conflicts")
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	api, err := conflicts.NewAPI(cfg)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry(prometheus.Labels{"version": version, "revision": revision, "component": "conflicts"})
	m := conflicts.NewMetrics(reg)
	return o.runElected(ctx, log, elected{name: "conflicts", registry: reg, leader: m.Leader, lease: api.Lease(o.namespace, o.leaseName),
		start: func(_, parent context.Context) (electedController, func(), error) {
			b := record.NewBroadcaster(record.WithContext(parent), record.WithCorrelatorOptions(kube.CorrelatorOptions()))
			b.StartRecordingToSink(api.EventSink())
			ctrl, err := conflicts.NewController(conflicts.Config{Source: api.Source(), Metrics: m, Logger: log, Window: o.window,
				Recorder: b.NewRecorder(api.Scheme(), corev1.EventSource{Component: vocab.ConflictsEventComponent})})
			if err != nil {
				b.Shutdown()
				return nil, nil, err
			}
			log.Info("nodeaddr conflicts starting", "version", version, "revision", revision, "leader_elect", o.leaderElect,
				"lease", o.namespace+"/"+o.leaseName, "move_window", o.window, "bind_address", o.bindAddr)
			return ctrl, b.Shutdown, nil
		}})
}
