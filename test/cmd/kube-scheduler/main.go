// Command kube-scheduler is the upstream scheduler, built from the Go module proxy for the real-node
// suite (test/node). Same release as kube-apiserver (see test/go.mod).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
