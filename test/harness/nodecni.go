package harness

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeCNI writes the node's CNI configuration; containerd watches the directory, so a node
// started without one becomes Ready once it is written.
func (n *RealNode) writeCNI(conflist string) {
	if err := os.WriteFile(filepath.Join(n.Dir, "net.d", "10-node.conflist"), []byte(conflist), 0o644); err != nil {
		n.T.Fatal(err)
	}
}

// cniNetwork names this node's pod network; libcni keeps its cache under /var/lib/cni/results
// with this name in each file (no setting moves it), which teardown removes.
func (n *RealNode) cniNetwork() string { return "nodeaddr-" + n.id }

// cniConfig: a bridge with host-local IPAM (state under Dir) from a private range inside the node's
// namespace. No IP masquerade: there is nowhere to masquerade to. Besides the bridge's subnet the
// pods route only the Service network (the API server's --service-cluster-ip-range) through the
// node (PodGateway), where kube-proxy carries ClusterIPs to their endpoints, and NodeOptions.PodRoutes:
// no default route.
// In a DualStack cluster each pod also gets an address from PodCIDR6 and a route to ServiceCIDR6
// (the bridge plugin then turns IPv6 forwarding on in the node's namespace: an uplink that takes its
// addresses from router advertisements needs accept_ra=2).
func (n *RealNode) cniConfig() string {
	ranges, routes := `[{"subnet": "10.244.0.0/24"}]`, `{"dst": "10.96.0.0/16"}`
	for _, r := range n.podRoutes {
		routes += fmt.Sprintf(`, {"dst": %q}`, r)
	}
	if n.C.Options.DualStack {
		ranges += fmt.Sprintf(`, [{"subnet": %q}]`, PodCIDR6)
		routes += fmt.Sprintf(`, {"dst": %q}`, ServiceCIDR6)
	}
	return fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": %q, "ranges": [%s],
            "routes": [%s]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}`, n.cniNetwork(), filepath.Join(n.Dir, "cni"), ranges, routes)
}
