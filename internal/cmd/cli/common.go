package cli

import (
	"log/slog"

	"github.com/spf13/pflag"
)

// Common are the flags every command takes, defined here once.
type Common struct {
	Kubeconfig string
	LogLevel   slog.Level
	LogFormat  string
	Version    bool
	level      string // --log-level as given
	wording    Wording
}

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
