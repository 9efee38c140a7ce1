package main

import "strings"

// envFlags are the flag defaults taken from the environment.
type envFlags struct {
	nodeName    string // NODE_NAME, for --node-name (the DaemonSet sets it from spec.nodeName)
	annotations string // NODEADDR_ANNOTATIONS, for --annotations
}

func envDefaults(getenv func(string) string) envFlags {
	return envFlags{nodeName: getenv("NODE_NAME"), annotations: getenv("NODEADDR_ANNOTATIONS")}
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
