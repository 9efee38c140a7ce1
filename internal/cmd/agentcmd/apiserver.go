package agentcmd

import (
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/internal/agent"
	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// apiServerConfig is where the apiserver target (--internal-ip-target's default) takes the API
// server's addresses, nil when no target names it: the kubeconfig's server when it is an IP outside
// the Service network (the in-cluster config names the kubernetes Service's ClusterIP, whose route
// says nothing), then the kubernetes EndpointSlice through client (nil in a dry run, which reads
// only the kubeconfig given with --kubeconfig, contacting nothing).
func (a *command) apiServerConfig(cfg *rest.Config, client *kube.Client) (*agent.APIServerConfig, error) {
	if !slices.ContainsFunc(a.opts.targets(), func(t resolver.Target) bool { return t.APIServer }) {
		return nil, nil
	}
	if cfg == nil && a.opts.dryRun && a.opts.Kubeconfig != "" {
		var err error
		if cfg, err = cli.RestConfig(a.opts.Kubeconfig, "nodeaddr", a.env.Version); err != nil {
			return nil, err
		}
	}
	c := &agent.APIServerConfig{}
	if cfg != nil {
		c.Static = serverAddress(cfg.Host, a.opts.serviceCIDRs)
	}
	if client != nil {
		c.Slices = client.EndpointSlices("default")
	}
	return c, nil
}

// serverAddress is a kubeconfig server's address when it is an IP literal that is neither loopback
// (a node-local proxy, as k3s agents use) nor inside the Service network.
func serverAddress(host string, service []netip.Prefix) []netip.Addr {
	if !strings.Contains(host, "://") {
		host = "https://" + host // rest.Config allows host:port
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil || ip.Zone() != "" {
		return nil
	}
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsUnspecified() || slices.ContainsFunc(service, func(p netip.Prefix) bool { return p.Contains(ip) }) {
		return nil
	}
	return []netip.Addr{ip}
}
