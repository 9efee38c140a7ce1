// Package conflictscmd is `nodeaddr conflicts`: the cluster-wide address conflict detector
// (internal/conflicts), one leader-elected Deployment with its own ServiceAccount
// (deploy/components/address-conflicts) run by internal/cmd/clusterside. It shares the approver's
// flags and run loop, not its rights.
package conflictscmd

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
	help   bool
}

// AddFlags defines the detector's flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet, getenv func(string) string) {
	o.Common.AddFlags(fs, cli.ControllerWording(getenv))
	o.Options.AddFlags(fs, "nodeaddr-conflicts", ":9814")
	fs.DurationVar(&o.Window, "move-window", conflicts.DefaultWindow, "an address listed by two Nodes for less than this is a move, not a conflict (0 flags at once)")
	fs.BoolVarP(&o.help, "help", "h", false, "show this help")
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

// parse parses args; --help prints usage to out and returns pflag.ErrHelp.
func parse(args []string, getenv func(string) string, out io.Writer) (*Options, error) {
	o := &Options{}
	fs := pflag.NewFlagSet("nodeaddr conflicts", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return nil, cli.Usagef("%v", err)
	}
	if o.help {
		fmt.Fprintf(out, "Usage: nodeaddr conflicts [flags]\n\nMarks every Node that lists an address another Node lists with the condition %s, a Warning Event naming the other Node and a metric; clears it when the conflict ends (run once per cluster: deploy/components/address-conflicts).\n\nFlags:\n%s",
			vocab.ConditionAddressConflict, fs.FlagUsages())
		return nil, pflag.ErrHelp
	}
	return o, o.Validate(fs, getenv)
}

// Main is `nodeaddr conflicts`: exit code 0 ok, 1 runtime failure, 2 usage.
func Main(ctx context.Context, env cli.Env, args []string) int {
	o, err := parse(args, env.Getenv, env.Stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "nodeaddr conflicts: %v (see nodeaddr conflicts --help)\n", err)
		return 2
	}
	if o.Version {
		fmt.Fprintln(env.Stdout, env.VersionLine())
		return 0
	}
	log := cli.NewLogger(o.LogLevel, o.LogFormat, 0, env.Stderr)
	if err := o.Run(ctx, env, log); err != nil {
		log.Error("nodeaddr conflicts failed", "err", err)
		return 1
	}
	return 0
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
