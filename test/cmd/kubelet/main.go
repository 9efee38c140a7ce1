// Command kubelet is the upstream kubelet, built from the Go module proxy for the real-node suite
// (test/node). test/go.mod pins the same release as kube-apiserver; the same source also builds
// the oldest supported release's kubelet in its generated build module (test/harness/versions.go).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(newKubeletCommand()))
}

// newKubeletCommand calls app.NewKubeletCommand with a context where the release takes one (1.37.2
// does, and a nil context panics inside the command) and without one where it does not (1.30.14 and
// 1.33.13): the one source compiles against both signatures.
func newKubeletCommand() *cobra.Command {
	switch f := any(app.NewKubeletCommand).(type) {
	case func(context.Context) *cobra.Command:
		return f(context.Background())
	case func() *cobra.Command:
		return f()
	default:
		panic(fmt.Sprintf("app.NewKubeletCommand has an unknown signature %T", f))
	}
}
