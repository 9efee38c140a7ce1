// Command kubelet is the upstream kubelet, built from the Go module proxy for the real-node suite
// (test/node). test/go.mod pins the same release as kube-apiserver; the same source also builds
// the oldest supported release's kubelet in its generated build module (test/harness/versions.go).
package main

import (
	"context"
	"os"
	"reflect"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(newKubeletCommand()))
}

// newKubeletCommand calls app.NewKubeletCommand with a context where the release takes one (1.31
// and later; a nil context panics inside the command, checked on 1.37.2) and without one on 1.30:
// the one source compiles against both signatures.
func newKubeletCommand() *cobra.Command {
	f := reflect.ValueOf(app.NewKubeletCommand)
	var args []reflect.Value
	if f.Type().NumIn() == 1 {
		args = append(args, reflect.ValueOf(context.Background()))
	}
	return f.Call(args)[0].Interface().(*cobra.Command)
}
