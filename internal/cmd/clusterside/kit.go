package clusterside

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/metrics"
)

// Kit is what every cluster-side command builds before its controller: the REST config (user
// agent nodeaddr-<component>, the command's rate limits), the metrics registry labelled with the
// build and the component, and the Event broadcaster, correlated as the agent's is.
type Kit struct {
	Config   *rest.Config
	Registry *prometheus.Registry
	events   record.EventBroadcaster
}

// NewKit builds the kit of `nodeaddr component` from --kubeconfig (else the in-cluster
// configuration); Close stops its Event broadcaster.
func NewKit(ctx context.Context, env cli.Env, kubeconfig, component string, qps float32, burst int) (*Kit, error) {
	cfg, err := cli.RestConfig(kubeconfig, "nodeaddr-"+component, env.Version)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = qps, burst
	return &Kit{
		Config:   cfg,
		Registry: metrics.NewRegistry(prometheus.Labels{"version": env.Version, "revision": env.Revision, "component": component}),
		events:   record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(kube.CorrelatorOptions())),
	}, nil
}

// Recorder records the controller's Events, from source, to sink.
func (k *Kit) Recorder(sink kube.EventSink, scheme *runtime.Scheme, source string) record.EventRecorder {
	k.events.StartRecordingToSink(sink)
	return k.events.NewRecorder(scheme, corev1.EventSource{Component: source})
}

// Close stops the Event broadcaster.
func (k *Kit) Close() { k.events.Shutdown() }

// LogStarting logs "nodeaddr <component> starting" with the build, the Lease and the listener
// around the command's own attributes.
func (o *Options) LogStarting(log *slog.Logger, env cli.Env, component string, attrs ...any) {
	args := append([]any{"version", env.Version, "revision", env.Revision, "leader_elect", o.LeaderElect,
		"lease", o.Namespace + "/" + o.LeaseName}, attrs...)
	log.Info("nodeaddr "+component+" starting", append(args, "bind_address", o.BindAddr)...)
}
