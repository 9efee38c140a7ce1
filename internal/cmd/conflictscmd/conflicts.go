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

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/cmd/clusterside"
	"github.com/nodeaddr/nodeaddr/internal/conflicts"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
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

// Validate checks --move-window.
func (o *Options) Validate() error {
	if o.Window < 0 {
		return cli.Usagef("--move-window: %v is negative", o.Window)
	}
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
	kit, err := clusterside.NewKit(ctx, env, o.Kubeconfig, "conflicts", 50, 100)
	if err != nil {
		return err
	}
	defer kit.Close()
	api, err := conflicts.NewAPI(kit.Config)
	if err != nil {
		return err
	}
	m := conflicts.NewMetrics(kit.Registry)
	rec := kit.Recorder(api.EventSink(), api.Scheme(), vocab.ConflictsEventComponent)
	start := func(context.Context) (clusterside.Controller, error) {
		// The controller's informer waits for the API server: /readyz says so until it has synced.
		ctrl, err := conflicts.NewController(conflicts.Config{Source: api.Source(), Metrics: m, Logger: log, Window: o.Window,
			Recorder: rec})
		if err != nil {
			return nil, err
		}
		o.LogStarting(log, env, "conflicts", "move_window", o.Window)
		return ctrl, nil
	}
	return o.Options.Run(ctx, clusterside.Spec{
		Component: "conflicts", Logger: log, Registry: kit.Registry, Leader: m.Leader, Lease: api.Lease, Start: start,
	})
}
