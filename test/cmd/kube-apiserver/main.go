// Command kube-apiserver is the upstream API server, built from the Go module proxy for the
// end-to-end suite. It exists so the suite can pin one exact release (see test/go.mod).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
