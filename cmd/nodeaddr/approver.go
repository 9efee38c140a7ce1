package main

// `nodeaddr approver`: the central kubelet-serving CSR approver (internal/csrapproval), one
// leader-elected Deployment for the cluster. The per-node agents hold no CSR right.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval"
	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/leader"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/metrics"
)

// clusterOptions are the flags every cluster-side command shares (the approver, the remediator):
// the kubeconfig, leader election, the listener, logging.
type clusterOptions struct {
	kubeconfig, namespace, leaseName, bindAddr string
	leaderElect, version                       bool
	logLevel                                   slog.Level
	logFormat                                  string
	level                                      string // --log-level as given, until finish
}

// addClusterFlags defines the shared flags on fs; lease and bind are the command's defaults of
// --leader-election-id and --bind-address.
func (o *clusterOptions) addClusterFlags(fs *pflag.FlagSet, getenv func(string) string, lease, bind string) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "kubeconfig file (env KUBECONFIG); in-cluster configuration when empty")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "decide only while holding the leader Lease (run several replicas, one decides)")
	fs.StringVar(&o.namespace, "leader-election-namespace", "", "namespace of the leader Lease (default: env POD_NAMESPACE, else the pod's namespace, else kube-system)")
	fs.StringVar(&o.leaseName, "leader-election-id", lease, "name of the leader Lease")
	fs.StringVar(&o.bindAddr, "bind-address", bind, "address of /healthz, /readyz and /metrics (plain HTTP; \"0\" disables)")
	fs.StringVar(&o.level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
}

// finish validates the shared flags after parsing and fills the Lease's namespace.
func (o *clusterOptions) finish(getenv func(string) string) error {
	if err := o.logLevel.UnmarshalText([]byte(o.level)); err != nil {
		return usagef("--log-level: %q is not one of debug, info, warn, error", o.level)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return usagef("--log-format: %q is not text or json", o.logFormat)
	}
	if o.namespace == "" {
		b, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace") // none out of a pod
		o.namespace = cmp.Or(getenv("POD_NAMESPACE"), strings.TrimSpace(string(b)), "kube-system")
	}
	return nil
}

// approverOptions are the approver's flags.
type approverOptions struct {
	clusterOptions
	policy       csrapproval.Policy
	serviceCIDRs []netip.Prefix
}

// parseApproverFlags parses the approver's args; -h prints usage to out and returns pflag.ErrHelp.
func parseApproverFlags(args []string, getenv func(string) string, out io.Writer) (*approverOptions, error) {
	o := &approverOptions{}
	fs := pflag.NewFlagSet("nodeaddr approver", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.addClusterFlags(fs, getenv, "nodeaddr-approver", ":9813")
	policy := rules.PolicyFlags(fs)
	help := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(args); err != nil {
		return nil, usagef("%v", err)
	}
	if *help {
		fmt.Fprintf(out, "Usage: nodeaddr approver [flags]\n\nApproves kubelet-serving CSRs whose SANs are the node's own name and the addresses its nodeaddr agent published (run once per cluster: deploy/components/kubelet-serving-csr).\n\nFlags:\n%s", fs.FlagUsages())
		return nil, pflag.ErrHelp
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.policy, o.serviceCIDRs, err = policy(); err != nil {
		return nil, usagef("%v", err)
	}
	return o, o.finish(getenv)
}

// runApprover is `nodeaddr approver`: exit code 0 ok, 1 runtime failure, 2 usage.
func runApprover(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseApproverFlags(args, getenv, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodeaddr approver: %v (see nodeaddr approver --help)\n", err)
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, versionLine())
		return 0
	}
	log := newLogger(&options{logLevel: o.logLevel, logFormat: o.logFormat}, stderr)
	if err := o.run(ctx, log); err != nil {
		log.Error("nodeaddr approver failed", "err", err)
		return 1
	}
	return 0
}

func (o *approverOptions) run(ctx context.Context, log *slog.Logger) error {
	cfg, err := restConfig(o.kubeconfig, "nodeaddr-approver")
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	api, err := csrapproval.NewAPI(cfg, nil)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry(prometheus.Labels{"version": version, "revision": revision, "component": "approver"})
	m := csrapproval.NewMetrics(reg)
	parent := ctx // the process's: SIGTERM ends it
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var started atomic.Pointer[csrapproval.Controller] // once the API server has answered
	var leading atomic.Bool
	stop, err := o.serveProbes(reg, readiness(&leading, func() readier {
		if c := started.Load(); c != nil {
			return c
		}
		return nil
	}), log, cancel)
	if err != nil {
		return err
	}
	defer stop()
	// At install the API server may not answer yet (the `kubernetes` Service's ClusterIP before
	// kube-proxy programs it): wait for it, serving /healthz, not ready.
	src, err := api.WaitSource(ctx, log)
	if err != nil && parent.Err() != nil {
		log.Info("nodeaddr approver stopped while waiting for the API server", "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	b := record.NewBroadcaster(record.WithContext(parent), record.WithCorrelatorOptions(kube.CorrelatorOptions()))
	b.StartRecordingToSink(api.EventSink())
	defer b.Shutdown()
	ctrl, err := csrapproval.NewController(csrapproval.Config{
		Source: src, Metrics: m, Logger: log, Policy: o.policy, ServiceCIDRs: o.serviceCIDRs,
		Recorder: b.NewRecorder(api.Scheme(), corev1.EventSource{Component: vocab.ApproverEventComponent}),
	})
	if err != nil {
		return err
	}
	started.Store(ctrl)
	log.Info("nodeaddr approver starting", "version", version, "revision", revision, "leader_elect", o.leaderElect,
		"lease", o.namespace+"/"+o.leaseName, "service_cidr_objects", src.ServiceCIDRs != nil, "service_cidrs", fmt.Sprint(o.serviceCIDRs),
		"allowed_dns_suffixes", fmt.Sprint(o.policy.DNSSuffixes), "allowed_ip_prefixes", fmt.Sprint(o.policy.IPPrefixes),
		"bind_address", o.bindAddr)
	return o.elect(ctx, log, api.Lease(o.namespace, o.leaseName), &leading, m.Leader, ctrl.Run, cancel)
}

// readier is a controller that says when it is ready (its informers synced).
type readier interface{ Ready() error }

// readiness is /readyz: not before the API server answered (ctrl nil), then ready on standby, and
// when leading once the controller's informers have synced.
func readiness(leading *atomic.Bool, ctrl func() readier) func() error {
	return func() error {
		c := ctrl()
		switch {
		case c == nil:
			return errors.New("waiting for the API server")
		case !leading.Load():
			return nil // a standby is ready: it decides nothing until it leads
		}
		return c.Ready()
	}
}

// serveProbes serves /healthz (the process serves), /readyz (ready) and /metrics (reg) on
// --bind-address ("0": nothing); a failing listener cancels. stop closes it.
func (o *clusterOptions) serveProbes(reg *prometheus.Registry, ready func() error, log *slog.Logger, cancel func()) (stop func(), err error) {
	if !metrics.Enabled(o.bindAddr) {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", o.bindAddr)
	if err != nil {
		return nil, fmt.Errorf("--bind-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", metrics.Probe(nil))
	mux.Handle("/readyz", metrics.Probe(ready))
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := metrics.NewHTTPServer(mux)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("listener failed", "err", err)
			cancel()
		}
	}()
	return func() { _ = srv.Close() }, nil
}

// elect runs run while this replica holds the Lease (at once without --leader-elect), with gauge 1
// and leading true meanwhile; a run that fails cancels. A replica that lost the Lease returns
// leader.ErrLeaseLost and exits; its Deployment starts it afresh.
func (o *clusterOptions) elect(ctx context.Context, log *slog.Logger, lease leader.LeaseClient, leading *atomic.Bool,
	gauge prometheus.Gauge, run func(context.Context) error, cancel func()) error {
	var runErr error
	lead := func(ctx context.Context) {
		leading.Store(true)
		gauge.Set(1)
		defer gauge.Set(0)
		if runErr = run(ctx); runErr != nil {
			cancel()
		}
	}
	if !o.leaderElect {
		lead(ctx)
		return runErr
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	e := &leader.Elector{Client: lease, Identity: fmt.Sprintf("%s_%d", host, time.Now().UnixNano()), Logger: log}
	if err := e.Run(ctx, lead); err != nil {
		return err
	}
	return runErr
}
