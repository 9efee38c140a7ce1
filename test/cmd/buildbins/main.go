// Command buildbins builds (once, cached under $NODEADDR_CACHE_DIR or test/.cache) what the
// end-to-end suite runs, printing progress: kube-apiserver and etcd, nodeaddr itself, and the real
// node's components (kubelet, kube-controller-manager, kube-scheduler, containerd, runc, CNI
// plugins, the pause binary). Cold, the Kubernetes builds take about 4 minutes each on 2 cores.
// -node=false skips the real node's components.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func main() {
	node := flag.Bool("node", true, "also build the real node's components (test/node)")
	flag.Parse()
	b, err := harness.Build(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildbins:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "buildbins: ready: %s, %s, %s\n", b.APIServer, b.Etcd, b.Nodeaddr)
	if !*node {
		return
	}
	nb, err := harness.BuildNode(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildbins:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "buildbins: ready: %s, %s, %s, %s, %s, %s, %s\n",
		nb.Kubelet, nb.ControllerManager, nb.Scheduler, nb.Containerd, nb.Runc, nb.CNIDir, nb.Pause)
}
