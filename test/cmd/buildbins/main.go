// Command buildbins builds (once, cached under $NODEADDR_CACHE_DIR or test/.cache) what the
// end-to-end suite runs, printing progress: kube-apiserver and etcd, nodeaddr itself, and the real
// node's components (kubelet, kube-controller-manager, kube-scheduler, containerd, runc, CNI
// plugins, the pause binary). Cold, the Kubernetes builds take about 4 minutes each on 2 cores.
// -node=false skips the real node's components; -release first builds the release rehearsal's
// tools (cosign, cyclonedx-gomod, the registry, helm). With -matrix it builds the older
// kube-apiservers and each release's policy type checker for the version matrix (harness.MatrixVersions,
// test/matrix), and what the real node's fresh-node scenario on a whole older cluster needs
// (harness.NodeVersions, test/node): that release's kube-apiserver, kubelet,
// kube-controller-manager and kube-scheduler. -older-node builds only the latter. -operator also
// builds the Prometheus Operator that test/monitoring runs (harness.PrometheusOperatorVersion) and
// test/cmd/kubesd, Prometheus's own Kubernetes discovery for Debian's Prometheus, which lacks it.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func main() {
	node := flag.Bool("node", true, "also build the real node's components (test/node) and flanneld (test/cluster)")
	matrix := flag.Bool("matrix", false, "build the older kube-apiservers and policy type checkers of harness.MatrixVersions and the older releases' node components of harness.NodeVersions (instead of the newest node's components)")
	olderNode := flag.Bool("older-node", false, "build only the older releases' kube-apiserver and node components of harness.NodeVersions (instead of the newest node's components)")
	release := flag.Bool("release", false, "first build what the release rehearsal (test/release/rehearsal) needs: cosign, cyclonedx-gomod, the registry and helm")
	operator := flag.Bool("operator", false, "first build the Prometheus Operator, kubesd (Prometheus's Kubernetes discovery) and helm that test/monitoring runs")
	flag.Parse()
	if *operator {
		op, err := harness.BuildPrometheusOperator(os.Stderr)
		check(err)
		sd, err := harness.BuildKubeSD(os.Stderr)
		check(err)
		helm, err := harness.BuildHelm(os.Stderr)
		check(err)
		fmt.Fprintf(os.Stderr, "buildbins: ready: %s, %s, %s\n", op, sd, helm)
	}
	if *release {
		r, err := harness.BuildReleaseTools(os.Stderr)
		check(err)
		helm, err := harness.BuildHelm(os.Stderr)
		check(err)
		fmt.Fprintf(os.Stderr, "buildbins: ready: %s, %s, %s, %s\n", r.Cosign, r.CycloneDX, r.Registry, helm)
	}
	b, err := harness.Build(os.Stderr)
	check(err)
	fmt.Fprintf(os.Stderr, "buildbins: ready: %s, %s, %s\n", b.APIServer, b.Etcd, b.Nodeaddr)
	switch {
	case *matrix:
		for _, v := range harness.MatrixVersions {
			for _, build := range []func(io.Writer, string) (string, error){harness.BuildAPIServer, harness.BuildTypeChecker} {
				p, err := build(os.Stderr, v)
				check(err)
				fmt.Fprintf(os.Stderr, "buildbins: ready: %s\n", p)
			}
		}
		buildOlderNodes()
	case *olderNode:
		buildOlderNodes()
	case *node:
		nb, err := harness.BuildNode(os.Stderr)
		check(err)
		fl, err := harness.BuildFlannel(os.Stderr)
		check(err)
		fmt.Fprintf(os.Stderr, "buildbins: ready: %s, %s, %s, %s, %s, %s, %s, %s\n",
			nb.Kubelet, nb.ControllerManager, nb.Scheduler, nb.Containerd, nb.Runc, nb.CNIDir, nb.Pause, fl)
	}
}

// buildOlderNodes builds every older release of harness.NodeVersions as a whole cluster: its
// kube-apiserver, kubelet, kube-controller-manager and kube-scheduler (plus the newest node's
// runtime: containerd, runc, CNI plugins).
func buildOlderNodes() {
	for _, v := range harness.NodeVersions {
		if v == harness.KubernetesVersion {
			continue // built without -matrix, with the rest of the node
		}
		api, err := harness.BuildAPIServer(os.Stderr, v)
		check(err)
		nb, err := harness.BuildNodeVersion(os.Stderr, v)
		check(err)
		fmt.Fprintf(os.Stderr, "buildbins: ready: %s, %s, %s, %s\n", api, nb.Kubelet, nb.ControllerManager, nb.Scheduler)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildbins:", err)
		os.Exit(1)
	}
}
