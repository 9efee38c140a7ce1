// Package approvercmd is `nodeaddr approver`: the central kubelet-serving CSR approver
// (internal/csrapproval), one leader-elected Deployment for the cluster run by
// internal/cmd/clusterside. The per-node agents hold no CSR right.
package approvercmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/cmd/clusterside"
	"github.com/nodeaddr/nodeaddr/internal/csrapproval"
	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/metrics"
)

// Options are the approver's flags.
type Options struct {
	cli.Common
	clusterside.Options
	Policy       csrapproval.Policy
	ServiceCIDRs []netip.Prefix
	policy       func() (csrapproval.Policy, []netip.Prefix, error) // rules.PolicyFlags' parser
}

// AddFlags defines the approver's flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet, getenv func(string) string) {
	o.Common.AddFlags(fs, cli.ControllerWording(getenv))
	o.Options.AddFlags(fs, "nodeaddr-approver", ":9813")
	o.policy = rules.PolicyFlags(fs)
}

// Validate parses what the flags hold and fills the defaults read from the environment.
func (o *Options) Validate(fs *pflag.FlagSet, getenv func(string) string) error {
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.Policy, o.ServiceCIDRs, err = o.policy(); err != nil {
		return cli.Usagef("%v", err)
	}
	if err := o.ValidateLogging(); err != nil {
		return err
	}
	o.Common.Complete(getenv)
	o.Options.Complete(getenv)
	return nil
}

// about is the description --help prints.
var about = "Approves kubelet-serving CSRs whose SANs are the node's own name and the addresses its nodeaddr agent published (run once per cluster: deploy/components/kubelet-serving-csr)."

// parse parses args; --help prints usage to out and returns pflag.ErrHelp.
func parse(args []string, getenv func(string) string, out io.Writer) (*Options, error) {
	o := &Options{}
	return o, clusterside.Parse(o, "approver", about, args, getenv, out)
}

// Main is `nodeaddr approver`: exit code 0 ok, 1 runtime failure, 2 usage.
func Main(ctx context.Context, env cli.Env, args []string) int {
	return clusterside.Main(ctx, env, args, "approver", about, &Options{})
}

// Run builds the API clients and runs the approver's controller through clusterside.
func (o *Options) Run(ctx context.Context, env cli.Env, log *slog.Logger) error {
	cfg, err := cli.RestConfig(o.Kubeconfig, "nodeaddr-approver", env.Version)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	api, err := csrapproval.NewAPI(cfg, nil)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry(prometheus.Labels{"version": env.Version, "revision": env.Revision, "component": "approver"})
	m := csrapproval.NewMetrics(reg)
	b := record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(kube.CorrelatorOptions()))
	b.StartRecordingToSink(api.EventSink())
	defer b.Shutdown()
	start := func(ctx context.Context) (clusterside.Controller, error) {
		// At install the API server may not answer yet (the `kubernetes` Service's ClusterIP before
		// kube-proxy programs it): wait for it, serving /healthz, not ready.
		src, err := api.WaitSource(ctx, log)
		if err != nil {
			return nil, err
		}
		ctrl, err := csrapproval.NewController(csrapproval.Config{
			Source: src, Metrics: m, Logger: log, Policy: o.Policy, ServiceCIDRs: o.ServiceCIDRs,
			Recorder: b.NewRecorder(api.Scheme(), corev1.EventSource{Component: vocab.ApproverEventComponent}),
		})
		if err != nil {
			return nil, err
		}
		log.Info("nodeaddr approver starting", "version", env.Version, "revision", env.Revision, "leader_elect", o.LeaderElect,
			"lease", o.Namespace+"/"+o.LeaseName, "service_cidr_objects", src.ServiceCIDRs != nil, "service_cidrs", fmt.Sprint(o.ServiceCIDRs),
			"allowed_dns_suffixes", fmt.Sprint(o.Policy.DNSSuffixes), "allowed_ip_prefixes", fmt.Sprint(o.Policy.IPPrefixes),
			"bind_address", o.BindAddr)
		return ctrl, nil
	}
	return o.Options.Run(ctx, clusterside.Spec{
		Component: "approver", Logger: log, Registry: reg, Leader: m.Leader, Lease: api.Lease, Start: start,
	})
}
