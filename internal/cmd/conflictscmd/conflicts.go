// Package conflictscmd is `nodeaddr conflicts`: the cluster-wide address conflict detector
// (internal/conflicts), one leader-elected Deployment with its own ServiceAccount
// (deploy/components/address-conflicts) run by internal/cmd/clusterside. It shares the approver's
// flags and run loop, not its rights.
package conflictscmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/cmd/clusterside"
	"github.com/nodeaddr/nodeaddr/internal/conflicts"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/metrics"
)

// Options are the detector's flags.
type Options struct {
	cli.Common
	clusterside.Options
	Window time.Duration // --move-window
}

// AddFlags defines the detector's flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet, getenv func(string) string) {
	o.Common.AddFlags(fs, cli.ControllerWording(getenv))
	o.Options.AddFlags(fs, "nodeaddr-conflicts", ":9814")
	fs.DurationVar(&o.Window, "move-window", conflicts.DefaultWindow, "an address listed by two Nodes for less than this is a move, not a conflict (0 flags at once)")
}

// Validate checks what the flags hold and fills the defaults read from the environment.
func (o *Options) Validate(fs *pflag.FlagSet, getenv func(string) string) error {
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected arguments %q", fs.Args())
	}
	if o.Window < 0 {
		return cli.Usagef("--move-window: %v is negative", o.Window)
	}
	if err := o.ValidateLogging(); err != nil {
		return err
	}
	o.Common.Complete(getenv)
	o.Options.Complete(getenv)
	return nil
}

// about is the description --help prints.
var about = fmt.Sprintf("Marks every Node that lists an address another Node lists with the condition %s, a Warning Event naming the other Node and a metric; clears it when the conflict ends (run once per cluster: deploy/components/address-conflicts).", vocab.ConditionAddressConflict)

// parse parses args; --help prints usage to out and returns pflag.ErrHelp.
func parse(args []string, getenv func(string) string, out io.Writer) (*Options, error) {
	o := &Options{}
	return o, clusterside.Parse(o, "conflicts", about, args, getenv, out)
}

// Main is `nodeaddr conflicts`: exit code 0 ok, 1 runtime failure, 2 usage.
func Main(ctx context.Context, env cli.Env, args []string) int {
	return clusterside.Main(ctx, env, args, "conflicts", about, &Options{})
}

// Run builds the API clients and runs the detector's controller through clusterside.
func (o *Options) Run(ctx context.Context, env cli.Env, log *slog.Logger) error {
	cfg, err := cli.RestConfig(o.Kubeconfig, "nodeaddr-conflicts", env.Version)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	api, err := conflicts.NewAPI(cfg)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry(prometheus.Labels{"version": env.Version, "revision": env.Revision, "component": "conflicts"})
	m := conflicts.NewMetrics(reg)
	b := record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(kube.CorrelatorOptions()))
	b.StartRecordingToSink(api.EventSink())
	defer b.Shutdown()
	start := func(context.Context) (clusterside.Controller, error) {
		// The controller's informer waits for the API server: /readyz says so until it has synced.
		ctrl, err := conflicts.NewController(conflicts.Config{Source: api.Source(), Metrics: m, Logger: log, Window: o.Window,
			Recorder: b.NewRecorder(api.Scheme(), corev1.EventSource{Component: vocab.ConflictsEventComponent})})
		if err != nil {
			return nil, err
		}
		log.Info("nodeaddr conflicts starting", "version", env.Version, "revision", env.Revision, "leader_elect", o.LeaderElect,
			"lease", o.Namespace+"/"+o.LeaseName, "move_window", o.Window, "bind_address", o.BindAddr)
		return ctrl, nil
	}
	return o.Options.Run(ctx, clusterside.Spec{
		Component: "conflicts", Logger: log, Registry: reg, Leader: m.Leader, Lease: api.Lease, Start: start,
	})
}
