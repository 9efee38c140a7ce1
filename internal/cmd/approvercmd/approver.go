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

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/cmd/clusterside"
	"github.com/nodeaddr/nodeaddr/internal/csrapproval"
	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
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

// Validate parses the policy flags.
func (o *Options) Validate() error {
	var err error
	if o.Policy, o.ServiceCIDRs, err = o.policy(); err != nil {
		return cli.Usagef("%v", err)
	}
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
	kit, err := clusterside.NewKit(ctx, env, o.Kubeconfig, "approver", 50, 100)
	if err != nil {
		return err
	}
	defer kit.Close()
	api, err := csrapproval.NewAPI(kit.Config, nil)
	if err != nil {
		return err
	}
	m := csrapproval.NewMetrics(kit.Registry)
	rec := kit.Recorder(api.EventSink(), api.Scheme(), vocab.ApproverEventComponent)
	start := func(ctx context.Context) (clusterside.Controller, error) {
		// At install the API server may not answer yet (the `kubernetes` Service's ClusterIP before
		// kube-proxy programs it): wait for it, serving /healthz, not ready.
		src, err := api.WaitSource(ctx, log)
		if err != nil {
			return nil, err
		}
		ctrl, err := csrapproval.NewController(csrapproval.Config{
			Source: src, Metrics: m, Logger: log, Policy: o.Policy, ServiceCIDRs: o.ServiceCIDRs,
			Recorder: rec,
		})
		if err != nil {
			return nil, err
		}
		o.LogStarting(log, env, "approver", "service_cidr_objects", src.ServiceCIDRs != nil, "service_cidrs", fmt.Sprint(o.ServiceCIDRs),
			"allowed_dns_suffixes", fmt.Sprint(o.Policy.DNSSuffixes), "allowed_ip_prefixes", fmt.Sprint(o.Policy.IPPrefixes))
		return ctrl, nil
	}
	return o.Options.Run(ctx, clusterside.Spec{
		Component: "approver", Logger: log, Registry: kit.Registry, Leader: m.Leader, Lease: api.Lease, Start: start,
	})
}
