// Package cli is what every nodeaddr command shares: the process it runs in (Env), usage errors
// (exit 2), the flags every command takes (--kubeconfig, --log-level, --log-format, --version:
// Common), the logger and the API server's configuration. Each command is a package of its own
// (internal/cmd/agentcmd, internal/cmd/approvercmd, internal/cmd/remediatorcmd) with its Options,
// their flags, Validate and Run; cmd/nodeaddr only chooses one.
package cli

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"

	"github.com/spf13/pflag"

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
func (e Env) VersionLine() string {
	return fmt.Sprintf("nodeaddr %s (revision %s)", e.Version, e.Revision)
}

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

// Common are the flags every command takes, defined here once.
type Common struct {
	Kubeconfig string
	LogLevel   slog.Level
	LogFormat  string
	Version    bool
	level      string // --log-level as given
	wording    Wording
}

// Shared is c itself: the flags every command shares, for code that holds a command's Options
// (which embed Common) behind an interface (clusterside.Command).
func (c *Common) Shared() *Common { return c }

// Wording is how a command's --help words the shared flags: the agent's and the cluster side's
// have said it differently since their first release, and --help stays as it was.
type Wording struct {
	Kubeconfig, LogLevel, LogFormat string
	// KubeconfigDefault is --kubeconfig's default (the cluster side shows $KUBECONFIG there);
	// empty, $KUBECONFIG is read after parsing (Complete).
	KubeconfigDefault string
}

// AgentWording is the agent's (nodeaddr) wording.
var AgentWording = Wording{
	Kubeconfig: "path to a kubeconfig (else $KUBECONFIG, else in-cluster config)",
	LogLevel:   "log level: debug, info, warn or error", LogFormat: "log format: text or json",
}

// ControllerWording is a cluster-side controller's (nodeaddr approver), with $KUBECONFIG the default.
func ControllerWording(getenv func(string) string) Wording {
	return Wording{
		Kubeconfig: "kubeconfig file (env KUBECONFIG); in-cluster configuration when empty",
		LogLevel:   "debug, info, warn or error", LogFormat: "text or json", KubeconfigDefault: getenv("KUBECONFIG"),
	}
}

// AddKubeconfig defines --kubeconfig on fs.
func (c *Common) AddKubeconfig(fs *pflag.FlagSet, w Wording) {
	c.wording = w
	fs.StringVar(&c.Kubeconfig, "kubeconfig", w.KubeconfigDefault, w.Kubeconfig)
}

// AddVersion defines --version on fs.
func (c *Common) AddVersion(fs *pflag.FlagSet) {
	fs.BoolVar(&c.Version, "version", false, "print the version and exit")
}

// AddLogging defines --log-level and --log-format on fs.
func (c *Common) AddLogging(fs *pflag.FlagSet, w Wording) {
	fs.StringVar(&c.level, "log-level", "info", w.LogLevel)
	fs.StringVar(&c.LogFormat, "log-format", "text", w.LogFormat)
}

// AddFlags defines every common flag on one flag set.
func (c *Common) AddFlags(fs *pflag.FlagSet, w Wording) {
	c.AddKubeconfig(fs, w)
	c.AddLogging(fs, w)
	c.AddVersion(fs)
}

// Complete reads $KUBECONFIG when --kubeconfig is empty and its default was not $KUBECONFIG.
func (c *Common) Complete(getenv func(string) string) {
	if c.Kubeconfig == "" && c.wording.KubeconfigDefault == "" {
		c.Kubeconfig = getenv("KUBECONFIG")
	}
}

// ValidateLogging parses --log-level and checks --log-format.
func (c *Common) ValidateLogging() error {
	if err := c.LogLevel.UnmarshalText([]byte(c.level)); err != nil {
		return Usagef("--log-level: %q is not one of debug, info, warn, error", c.level)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return Usagef("--log-format: %q is not text or json", c.LogFormat)
	}
	return nil
}
