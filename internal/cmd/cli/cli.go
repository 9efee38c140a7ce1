// Package cli is what every nodeaddr command shares: the process it runs in (Env), usage errors
// (exit 2), the flags every command takes (--kubeconfig, --log-level, --log-format, --version:
// Common), the logger and the API server's configuration. Each command is a package of its own
// (internal/cmd/agentcmd, internal/cmd/approvercmd) with its Options, their flags, Validate and Run;
// cmd/nodeaddr only chooses one.
package cli

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// Env is the process a command runs in: its environment, its output and the build it is.
type Env struct {
	Getenv            func(string) string
	Stdout, Stderr    io.Writer
	Version, Revision string // main's, stamped by -ldflags "-X main.version=..."
}

// VersionLine is what --version prints.
func (e Env) VersionLine() string { return fmt.Sprintf("nodeaddr %s (revision %s)", e.Version, e.Revision) }

// UsageError is a bad command line: exit code 2, one line on stderr.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, args ...any) error { return UsageError{fmt.Sprintf(format, args...)} }

// RestConfig loads kubeconfig (several files when it is a list, as $KUBECONFIG), else the
// in-cluster configuration, with the User-Agent component/version.
func RestConfig(kubeconfig, component, version string) (cfg *rest.Config, err error) {
	if kubeconfig == "" {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("no --kubeconfig or KUBECONFIG and not running in a cluster: %w", err)
		}
	} else {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(kubeconfig)}
		if len(rules.Precedence) == 1 {
			rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
		}
		loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		if cfg, err = loader.ClientConfig(); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
	}
	cfg.UserAgent = component + "/" + version
	return cfg, nil
}

// NewLogger is the process's logger: format's handler at level, with klog (client-go) routed into
// it at verbosity (klog's -v).
func NewLogger(level slog.Level, format string, verbosity int, w io.Writer) *slog.Logger {
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, hopts)
	if format == "json" {
		h = slog.NewJSONHandler(w, hopts)
	}
	log := slog.New(h)
	// client-go logs through klog: one handler, one format. klog's V(n) arrives as level -n, gated
	// first by klog's verbosity (which decides at client construction whether requests are traced).
	klog.SetSlogLogger(log)
	SetKlogVerbosity(verbosity)
	return log
}

// SetKlogVerbosity sets klog's global -v, through its own flag as Kubernetes components do.
func SetKlogVerbosity(v int) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", strconv.Itoa(v)); err != nil {
		panic(err) // v is 0-10, checked by the command's flags
	}
}
