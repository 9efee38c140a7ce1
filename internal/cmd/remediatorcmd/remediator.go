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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/cmd/clusterside"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/remediation"
	"github.com/nodeaddr/nodeaddr/internal/remediation/verdict"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/metrics"
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
	fs.DurationVar(&o.Grace, "grace", verdict.DefaultGrace, "how long a Node's new addresses must hold before its stale hostNetwork pods are evicted (a flap or a failover and back within it evicts nothing)")
	fs.IntVar(&o.MaxPerNode, "max-evictions-per-node", 1, "evictions in flight (evicted, the pod not gone yet) on one Node at most")
	fs.IntVar(&o.MaxInFlight, "max-evictions", 10, "evictions in flight in the cluster at most")
}

// Validate checks what the flags hold and fills the defaults read from the environment.
func (o *Options) Validate(fs *pflag.FlagSet, getenv func(string) string) error {
	switch {
	case fs.NArg() > 0:
		return cli.Usagef("unexpected arguments %q", fs.Args())
	case o.Grace <= 0:
		return cli.Usagef("--grace: %s is not a positive duration", o.Grace)
	case o.MaxPerNode < 1 || o.MaxInFlight < 1:
		return cli.Usagef("--max-evictions-per-node and --max-evictions must be at least 1")
	}
	if err := o.ValidateLogging(); err != nil {
		return err
	}
	o.Common.Complete(getenv)
	o.Options.Complete(getenv)
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
	cfg, err := cli.RestConfig(o.Kubeconfig, "nodeaddr-remediator", env.Version)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 20, 40
	api, err := remediation.NewAPI(cfg, nil)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry(prometheus.Labels{"version": env.Version, "revision": env.Revision, "component": "remediator"})
	m := remediation.NewMetrics(reg)
	b := record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(kube.CorrelatorOptions()))
	b.StartRecordingToSink(api.EventSink())
	defer b.Shutdown()
	start := func(context.Context) (clusterside.Controller, error) {
		ctrl, err := remediation.NewController(remediation.Config{
			Source: api.Source(), Metrics: m, Logger: log, Grace: o.Grace, MaxPerNode: o.MaxPerNode, MaxInFlight: o.MaxInFlight,
			Recorder: b.NewRecorder(api.Scheme(), corev1.EventSource{Component: vocab.RemediatorEventComponent}),
		})
		if err != nil {
			return nil, err
		}
		log.Info("nodeaddr remediator starting", "version", env.Version, "revision", env.Revision, "leader_elect", o.LeaderElect,
			"lease", o.Namespace+"/"+o.LeaseName, "grace", o.Grace, "max_evictions_per_node", o.MaxPerNode,
			"max_evictions", o.MaxInFlight, "bind_address", o.BindAddr)
		return ctrl, nil
	}
	return o.Options.Run(ctx, clusterside.Spec{
		Component: "remediator", Logger: log, Registry: reg, Leader: m.Leader, Lease: api.Lease, Start: start,
	})
}
