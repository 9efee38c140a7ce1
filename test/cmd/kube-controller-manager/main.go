// Command kube-controller-manager is the upstream controller manager, built from the Go module proxy
// for the real-node suite (test/node): its daemonset, node-lifecycle and serviceaccount-token
// controllers run the shipped DaemonSet. Same release as kube-apiserver (see test/go.mod).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
