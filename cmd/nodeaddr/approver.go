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

// approverOptions are the approver's flags.
type approverOptions struct {
	kubeconfig, namespace, leaseName, bindAddr string
	leaderElect, version                       bool
	policy                                     csrapproval.Policy
	serviceCIDRs                               []netip.Prefix
	logLevel                                   slog.Level
	logFormat                                  string
}

// parseApproverFlags parses the approver's args; -h prints usage to out and returns pflag.ErrHelp.
func parseApproverFlags(args []string, getenv func(string) string, out io.Writer) (*approverOptions, error) {
	o := &approverOptions{}
	fs := pflag.NewFlagSet("nodeaddr approver", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var level string
	fs.StringVar(&o.kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "kubeconfig file (env KUBECONFIG); in-cluster configuration when empty")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "decide only while holding the leader Lease (run several replicas, one decides)")
	fs.StringVar(&o.namespace, "leader-election-namespace", "", "namespace of the leader Lease (default: env POD_NAMESPACE, else the pod's namespace, else kube-system)")
	fs.StringVar(&o.leaseName, "leader-election-id", "nodeaddr-approver", "name of the leader Lease")
	policy := rules.PolicyFlags(fs)
	fs.StringVar(&o.bindAddr, "bind-address", ":9813", "address of /healthz, /readyz and /metrics (plain HTTP; \"0\" disables)")
	fs.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
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
	if err := o.logLevel.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level: %q is not one of debug, info, warn, error", level)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return nil, usagef("--log-format: %q is not text or json", o.logFormat)
	}
	if o.namespace == "" {
		b, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace") // none out of a pod
		o.namespace = cmp.Or(getenv("POD_NAMESPACE"), strings.TrimSpace(string(b)), "kube-system")
	}
	return o, nil
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
	var (
		started atomic.Pointer[csrapproval.Controller] // once the API server has answered
		leading atomic.Bool
	)
	ready := func() error {
		ctrl := started.Load()
		switch {
		case ctrl == nil:
			return errors.New("waiting for the API server")
		case !leading.Load():
			return nil // a standby is ready: it decides nothing until it leads
		}
		return ctrl.Ready()
	}
	if metrics.Enabled(o.bindAddr) {
		ln, err := net.Listen("tcp", o.bindAddr)
		if err != nil {
			return fmt.Errorf("--bind-address: %w", err)
		}
		// /healthz: the process serves; /readyz: a standby, or a leader whose informers have synced.
		mux := http.NewServeMux()
		mux.Handle("/healthz", metrics.Probe(nil))
		mux.Handle("/readyz", metrics.Probe(ready))
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := metrics.NewHTTPServer(mux)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("approver listener failed", "err", err)
				cancel()
			}
		}()
		defer srv.Close()
	}
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
	var runErr error
	lead := func(ctx context.Context) {
		leading.Store(true)
		m.Leader.Set(1)
		defer m.Leader.Set(0)
		if runErr = ctrl.Run(ctx); runErr != nil {
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
	e := &leader.Elector{Client: api.Lease(o.namespace, o.leaseName), Identity: fmt.Sprintf("%s_%d", host, time.Now().UnixNano()), Logger: log}
	if err := e.Run(ctx, lead); err != nil {
		return err // a replica that lost the Lease exits; its Deployment starts it afresh
	}
	return runErr
}
