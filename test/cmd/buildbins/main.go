// Command buildbins builds (once, cached under $NODEADDR_CACHE_DIR or test/.cache) the
// kube-apiserver and etcd the end-to-end suite runs, and nodeaddr itself, printing progress: a cold
// kube-apiserver build takes about 4 minutes on 2 cores. With -matrix it also builds the older
// kube-apiservers and each release's policy type checker for the version matrix (harness.MatrixVersions, test/matrix).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func main() {
	matrix := flag.Bool("matrix", false, "also build the kube-apiservers and policy type checkers of harness.MatrixVersions")
	flag.Parse()
	b, err := harness.Build(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildbins:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "buildbins: ready: %s, %s, %s\n", b.APIServer, b.Etcd, b.Nodeaddr)
	if !*matrix {
		return
	}
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
}
