package clusterside

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
)

// Command is a cluster-side command's Options (which embed cli.Common and Options) as Main drives
// them: Validate checks only the command's own flags.
type Command interface {
	AddFlags(fs *pflag.FlagSet, getenv func(string) string)
	Validate() error
	Run(ctx context.Context, env cli.Env, log *slog.Logger) error
	Shared() *cli.Common
	ClusterSide() *Options
}

// ClusterSide is how Parse reaches the Options a command embeds.
func (o *Options) ClusterSide() *Options { return o }

// Parse parses args into o, the Options of `nodeaddr name`, and checks them: no argument, the
// command's own flags (o.Validate), the logging flags; then fills the defaults read from the
// environment. With --help it prints the usage (about, then the flags) to out and returns
// pflag.ErrHelp.
func Parse(o Command, name, about string, args []string, getenv func(string) string, out io.Writer) error {
	fs := pflag.NewFlagSet("nodeaddr "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs, getenv)
	help := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(args); err != nil {
		return cli.Usagef("%v", err)
	}
	if *help {
		fmt.Fprintf(out, "Usage: nodeaddr %s [flags]\n\n%s\n\nFlags:\n%s", name, about, fs.FlagUsages())
		return pflag.ErrHelp
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected arguments %q", fs.Args())
	}
	if err := o.Validate(); err != nil {
		return err
	}
	c := o.Shared()
	if err := c.ValidateLogging(); err != nil {
		return err
	}
	c.Complete(getenv)
	o.ClusterSide().Complete(getenv)
	return nil
}

// Main is `nodeaddr name` with o's flags: exit code 0 ok, 1 runtime failure, 2 usage.
func Main(ctx context.Context, env cli.Env, args []string, name, about string, o Command) int {
	err := Parse(o, name, about, args, env.Getenv, env.Stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "nodeaddr %s: %v (see nodeaddr %s --help)\n", name, err, name)
		return 2
	}
	c := o.Shared()
	if c.Version {
		fmt.Fprintln(env.Stdout, env.VersionLine())
		return 0
	}
	log := cli.NewLogger(c.LogLevel, c.LogFormat, 0, env.Stderr)
	if err := o.Run(ctx, env, log); err != nil {
		log.Error("nodeaddr "+name+" failed", "err", err)
		return 1
	}
	return 0
}
