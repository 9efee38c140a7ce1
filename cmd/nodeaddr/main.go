// Command nodeaddr keeps its own Node's status.addresses in step with the kernel: netlink events
// (watcher) trigger a debounced resolution (resolver) whose result is written to the Node with
// conflict-safe, rate-limited patches (publisher). `nodeaddr approver` is the cluster side's
// kubelet-serving CSR approver, `nodeaddr remediator` its evictor of the hostNetwork pods a
// renumbering left on an old address, `nodeaddr conflicts` its address conflict detector. Each
// command is a package of internal/cmd; main only chooses one.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodeaddr/nodeaddr/internal/cmd/agentcmd"
	"github.com/nodeaddr/nodeaddr/internal/cmd/approvercmd"
	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/cmd/conflictscmd"
	"github.com/nodeaddr/nodeaddr/internal/cmd/remediatorcmd"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code (0 ok, 1 runtime failure, 2 usage).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	env := cli.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr, Version: version, Revision: revision}
	if len(args) > 0 && args[0] == "approver" { // a new command: a package, and its line here
		return approvercmd.Main(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "conflicts" {
		return conflictscmd.Main(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "remediator" {
		return remediatorcmd.Main(ctx, env, args[1:])
	}
	return agentcmd.Main(ctx, env, args) // without a subcommand, nodeaddr is the agent
}
