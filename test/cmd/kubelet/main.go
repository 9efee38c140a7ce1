// Command kubelet is the upstream kubelet, built from the Go module proxy for the real-node suite
// (test/node). It pins the same release as kube-apiserver (see test/go.mod).
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	// A nil context panics inside the command (checked on 1.37.2).
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
