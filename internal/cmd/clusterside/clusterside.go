// Package clusterside runs a cluster-side controller (nodeaddr approver, nodeaddr remediator,
// nodeaddr conflicts): one leader-elected Deployment for the cluster, whose replicas serve
// /healthz, /readyz and /metrics, wait for the API server, and run the controller only while they
// hold its Lease (internal/leader). A command defines its own flags beside Options' and gives Run
// what it alone knows (Spec).
package clusterside

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/leader"
	"github.com/nodeaddr/nodeaddr/metrics"
)

// Options are the flags of every cluster-side controller: its leader Lease and its listener.
type Options struct {
	LeaderElect                    bool
	Namespace, LeaseName, BindAddr string
}

// AddFlags defines the leader election and listener flags, with this controller's Lease name and
// listener address as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet, leaseName, bindAddr string) {
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "decide only while holding the leader Lease (run several replicas, one decides)")
	fs.StringVar(&o.Namespace, "leader-election-namespace", "", "namespace of the leader Lease (default: env POD_NAMESPACE, else the pod's namespace, else kube-system)")
	fs.StringVar(&o.LeaseName, "leader-election-id", leaseName, "name of the leader Lease")
	fs.StringVar(&o.BindAddr, "bind-address", bindAddr, "address of /healthz, /readyz and /metrics (plain HTTP; \"0\" disables)")
}

// Complete sets the Lease's namespace when no flag gave it.
func (o *Options) Complete(getenv func(string) string) {
	if o.Namespace == "" {
		b, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace") // none out of a pod
		o.Namespace = cmp.Or(getenv("POD_NAMESPACE"), strings.TrimSpace(string(b)), "kube-system")
	}
}

// Controller is what a leader runs: Run until ctx ends, Ready once its informers have synced.
type Controller interface {
	Run(ctx context.Context) error
	Ready() error
}

// Spec is one controller as Run runs it.
type Spec struct {
	Component string // e.g. approver: "nodeaddr approver" in its log lines
	Logger    *slog.Logger
	Registry  *prometheus.Registry // served on /metrics
	Leader    prometheus.Gauge     // 1 while this replica leads
	// Lease is the client of the controller's leader Lease, writing as the controller's own field
	// manager (csrapproval.API.Lease, remediation's, conflicts.API.Lease).
	Lease func(namespace, name string) leader.LeaseClient
	// Start waits for the API server and builds the controller; its error ends Run.
	Start func(ctx context.Context) (Controller, error)
}

// Run serves the listener, starts the controller and runs it while this replica leads, until ctx
// ends (nil) or the controller fails or the Lease is lost (an error: the process exits and its
// Deployment starts it afresh).
func (o *Options) Run(ctx context.Context, s Spec) error {
	parent := ctx // the process's: SIGTERM ends it
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		started atomic.Pointer[Controller] // once the API server has answered
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
		return (*ctrl).Ready()
	}
	if err := o.serve(ctx, cancel, s, ready); err != nil {
		return err
	}
	ctrl, err := s.Start(ctx)
	if err != nil && parent.Err() != nil {
		s.Logger.Info("nodeaddr "+s.Component+" stopped while waiting for the API server", "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	started.Store(&ctrl)
	var runErr error
	lead := func(ctx context.Context) {
		leading.Store(true)
		s.Leader.Set(1)
		defer s.Leader.Set(0)
		if runErr = ctrl.Run(ctx); runErr != nil {
			cancel()
		}
	}
	if !o.LeaderElect {
		lead(ctx)
		return runErr
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	e := &leader.Elector{Client: s.Lease(o.Namespace, o.LeaseName), Identity: fmt.Sprintf("%s_%d", host, time.Now().UnixNano()), Logger: s.Logger}
	if err := e.Run(ctx, lead); err != nil {
		return err // a replica that lost the Lease exits; its Deployment starts it afresh
	}
	return runErr
}

// serve starts the listener on --bind-address, unless "0": /healthz while the process serves,
// /readyz a standby or a leader whose controller is ready, /metrics the registry. It ends with ctx.
func (o *Options) serve(ctx context.Context, cancel context.CancelFunc, s Spec, ready func() error) error {
	if !metrics.Enabled(o.BindAddr) {
		return nil
	}
	ln, err := net.Listen("tcp", o.BindAddr)
	if err != nil {
		return fmt.Errorf("--bind-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", metrics.Probe(nil))
	mux.Handle("/readyz", metrics.Probe(ready))
	mux.Handle("/metrics", promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{}))
	srv := metrics.NewHTTPServer(mux)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.Logger.Error(s.Component+" listener failed", "err", err)
			cancel()
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return nil
}
