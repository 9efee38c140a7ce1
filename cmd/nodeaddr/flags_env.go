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

// applyDryRunListeners opens no listener under --dry-run unless the user asks for one with its flag.
// A dry run has no kubelet to probe it and no API server to check scrapers' tokens for the default,
// secure /metrics, and it is run where a listener cannot open: beside a running agent (the ports
// are taken) or in a fresh network namespace, whose loopback is down (the README's demo). A
// warning about a listener the user never asked for would only be noise. Asked for explicitly, a
// listener is served (/metrics with --metrics-secure=false on loopback) or main warns that it
// cannot be, and a failure to open it is an error as in any run.
func (o *options) applyDryRunListeners(fs *pflag.FlagSet) {
	if !o.dryRun {
		return
	}
	if !fs.Changed("health-probe-bind-address") {
		o.probeAddr = "0"
	}
	for _, name := range metricsFlags {
		if fs.Changed(name) {
			return
		}
	}
	o.metricsAddr = "0"
}
