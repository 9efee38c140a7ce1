// Command helm is the upstream Helm CLI, built from the Go module proxy for the deploy tests
// (`helm template` of deploy/helm/nodeaddr). It shares test/go.mod's pinned k8s.io modules.
package main

import (
	"errors"
	"log/slog"
	"os"

	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"helm.sh/helm/v4/pkg/kube"
)

func main() {
	kube.ManagedFieldsManager = "helm"
	cmd, err := helmcmd.NewRootCmd(os.Stdout, os.Args[1:], helmcmd.SetupLogging)
	if err != nil {
		slog.Warn("command failed", slog.Any("error", err))
		os.Exit(1)
	}
	if err := cmd.Execute(); err != nil {
		if cerr, ok := errors.AsType[helmcmd.CommandError](err); ok {
			os.Exit(cerr.ExitCode)
		}
		os.Exit(1)
	}
}
