// Command buildbins builds (once, cached under $NODEADDR_CACHE_DIR or test/.cache) what the
// end-to-end suite runs, printing progress: kube-apiserver and etcd, nodeaddr itself, and the real
// node's components (kubelet, kube-controller-manager, kube-scheduler, containerd, runc, CNI
// plugins, the pause binary). Cold, the Kubernetes builds take about 4 minutes each on 2 cores.
// -node=false skips the real node's components. With -matrix it builds the older kube-apiservers
// and each release's policy type checker for the version matrix (harness.MatrixVersions,
// test/matrix), and the older releases' kubelet, kube-controller-manager and kube-scheduler for the
// real node's fresh-node scenario on a whole older cluster (harness.NodeVersions, test/node).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func main() {
	node := flag.Bool("node", true, "also build the real node's components (test/node)")
	matrix := flag.Bool("matrix", false, "build the older kube-apiservers and policy type checkers of harness.MatrixVersions and the older node components of harness.NodeVersions (instead of the newest node's components)")
	flag.Parse()
	b, err := harness.Build(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildbins:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "buildbins: ready: %s, %s, %s\n", b.APIServer, b.Etcd, b.Nodeaddr)
	if *matrix {
		for _, v := range harness.MatrixVersions {
			for _, build := range []func(io.Writer, string) (string, error){harness.BuildAPIServer, harness.BuildTypeChecker} {
				p, err := build(os.Stderr, v)
				if err != nil {
					fmt.Fprintln(os.Stderr, "buildbins:", err)
					os.Exit(1)
				}
				fmt.Fprintf(os.Stderr, "buildbins: ready: %s\n", p)
			}
		}
		for _, v := range harness.NodeVersions {
			if v == harness.KubernetesVersion {
				continue // built without -matrix, with the rest of the node
			}
			nb, err := harness.BuildNodeVersion(os.Stderr, v)
			if err != nil {
				fmt.Fprintln(os.Stderr, "buildbins:", err)
				os.Exit(1)
			}
			fmt.Fprintf(os.Stderr, "buildbins: ready: %s, %s, %s\n", nb.Kubelet, nb.ControllerManager, nb.Scheduler)
		}
		return
	}
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
