// Command kube-proxy is the upstream kube-proxy, built from the Go module proxy for the real-node
// suite's NodePort scenario (test/node): the same module, replace block and build as the kubelet
// (test/go.mod pins the release).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
