// Package remediatorcmd is `nodeaddr remediator`: it evicts the hostNetwork pods a renumbering left
// on their Node's old address (internal/remediation), one leader-elected Deployment for the cluster
// (deploy/components/pod-remediation) run by internal/cmd/clusterside. Its own ServiceAccount:
// approving and evicting are separate rights, deployed separately.
package remediatorcmd

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/cmd/clusterside"
	"github.com/nodeaddr/nodeaddr/internal/remediation"
	"github.com/nodeaddr/nodeaddr/internal/remediation/verdict"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// Options are the remediator's flags.
type Options struct {
	cli.Common
	clusterside.Options
	Grace                   time.Duration
	MaxPerNode, MaxInFlight int
}

// AddFlags defines the remediator's flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet, getenv func(string) string) {
	o.Common.AddFlags(fs, cli.ControllerWording(getenv))
	o.Options.AddFlags(fs, "nodeaddr-remediator", ":9814")
	verdict.GraceFlag(fs, &o.Grace)
	fs.IntVar(&o.MaxPerNode, "max-evictions-per-node", 1, "evictions in flight (evicted, the pod not gone yet) on one Node at most")
	fs.IntVar(&o.MaxInFlight, "max-evictions", 10, "evictions in flight in the cluster at most")
}

// Validate checks the grace and the eviction bounds.
func (o *Options) Validate() error {
	switch {
	case o.Grace <= 0:
		return cli.Usagef("--grace: %s is not a positive duration", o.Grace)
	case o.MaxPerNode < 1 || o.MaxInFlight < 1:
		return cli.Usagef("--max-evictions-per-node and --max-evictions must be at least 1")
	}
	return nil
}

// about is the description --help prints.
var about = "Evicts, through the Eviction API, the hostNetwork pods left on an address their Node no longer has (in status.podIPs, or started while the Node had it), so that their controllers create them on the new address (run once per cluster: deploy/components/pod-remediation)."

// parse parses args; --help prints usage to out and returns pflag.ErrHelp.
func parse(args []string, getenv func(string) string, out io.Writer) (*Options, error) {
	o := &Options{}
	return o, clusterside.Parse(o, "remediator", about, args, getenv, out)
}

// Main is `nodeaddr remediator`: exit code 0 ok, 1 runtime failure, 2 usage.
func Main(ctx context.Context, env cli.Env, args []string) int {
	return clusterside.Main(ctx, env, args, "remediator", about, &Options{})
}

// Run builds the API clients and runs the remediation controller through clusterside.
func (o *Options) Run(ctx context.Context, env cli.Env, log *slog.Logger) error {
	kit, err := clusterside.NewKit(ctx, env, o.Kubeconfig, "remediator", 20, 40)
	if err != nil {
		return err
	}
	defer kit.Close()
	api, err := remediation.NewAPI(kit.Config, nil)
	if err != nil {
		return err
	}
	m := remediation.NewMetrics(kit.Registry)
	rec := kit.Recorder(api.EventSink(), api.Scheme(), vocab.RemediatorEventComponent)
	start := func(context.Context) (clusterside.Controller, error) {
		ctrl, err := remediation.NewController(remediation.Config{
			Source: api.Source(), Metrics: m, Logger: log, Grace: o.Grace, MaxPerNode: o.MaxPerNode, MaxInFlight: o.MaxInFlight,
			Recorder: rec,
		})
		if err != nil {
			return nil, err
		}
		o.LogStarting(log, env, "remediator", "grace", o.Grace, "max_evictions_per_node", o.MaxPerNode, "max_evictions", o.MaxInFlight)
		return ctrl, nil
	}
	return o.Options.Run(ctx, clusterside.Spec{
		Component: "remediator", Logger: log, Registry: kit.Registry, Leader: m.Leader, Lease: api.Lease, Start: start,
	})
}
