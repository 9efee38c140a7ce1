package main

import (
	"strings"

	"github.com/spf13/pflag"
)

// envFlags are the flag defaults taken from the environment.
type envFlags struct {
	nodeName    string // NODE_NAME, for --node-name (the DaemonSet sets it from spec.nodeName)
	annotations string // NODEADDR_ANNOTATIONS, for --annotations
	// podNamespace is POD_NAMESPACE, for --check-namespace (the chart's test pod sets it).
	podNamespace string
}

func envDefaults(getenv func(string) string) envFlags {
	return envFlags{nodeName: getenv("NODE_NAME"), annotations: getenv("NODEADDR_ANNOTATIONS"), podNamespace: getenv("POD_NAMESPACE")}
}

// applyEnv completes what the flags left unset: the kubeconfig from $KUBECONFIG and, with
// --dry-run, the node name from the hostname (lowercased, as the kubelet does).
func (o *options) applyEnv(getenv func(string) string, hostname func() (string, error)) error {
	if o.kubeconfig == "" {
		o.kubeconfig = getenv("KUBECONFIG")
	}
	o.nodeName = strings.TrimSpace(o.nodeName)
	if o.nodeName != "" {
		return nil
	}
	if !o.dryRun {
		return usagef("--node-name (or NODE_NAME) is required")
	}
	h, err := hostname()
	if err != nil {
		return usagef("--node-name not set and the hostname is unknown: %v", err)
	}
	o.nodeName = strings.ToLower(h)
	return nil
}

// metricsFlags are the flags that ask for /metrics.
var metricsFlags = []string{"metrics-bind-address", "metrics-secure", "tls-cert-file", "tls-private-key-file"}

// applyDryRunListeners turns /metrics off under --dry-run unless a metrics flag was given. The
// default, secure /metrics needs an API server to check scrapers' tokens, which --dry-run does not
// contact; a warning about a listener the user never asked for would only be noise. Asked for
// explicitly, the agent serves it (--metrics-secure=false on loopback) or warns that it cannot.
func (o *options) applyDryRunListeners(fs *pflag.FlagSet) {
	if !o.dryRun {
		return
	}
	for _, name := range metricsFlags {
		if fs.Changed(name) {
			return
		}
	}
	o.metricsAddr = "0"
}
