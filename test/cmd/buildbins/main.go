// Command buildbins builds (once, cached under $NODEADDR_CACHE_DIR or test/.cache) the
// kube-apiserver and etcd the end-to-end suite runs, and nodeaddr itself, printing progress: a cold
// kube-apiserver build takes about 4 minutes on 2 cores.
package main

import (
	"fmt"
	"os"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func main() {
	b, err := harness.Build(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildbins:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "buildbins: ready: %s, %s, %s\n", b.APIServer, b.Etcd, b.Nodeaddr)
}
