package agentcmd

import (
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
)

// logOptions are the Logging section's own flag (--log-level and --log-format are cli.Common's).
type logOptions struct {
	v         int // --v as given
	verbosity int // klog's verbosity (client-go logs its requests at 6)
}

func (l *logOptions) addFlags(fs *pflag.FlagSet) {
	// -v=N and --v=N, as klog's flag in Kubernetes components (and local-ccm).
	fs.IntVarP(&l.v, "v", "v", 0, "verbosity 0-10 (local-ccm's --v), used when --log-level is not set: 0 info, 1-4 debug, N above 4 also client-go's V(N) logs (6: each API request)")
}

// validate sets the level from --log-level, else from --v (verbosityLevel), and klog's verbosity.
func (l *logOptions) validate(fs *pflag.FlagSet, c *cli.Common) error {
	if fs.Changed("v") {
		if l.v < 0 || l.v > 10 {
			return cli.Usagef("--v: %d is not a verbosity between 0 and 10", l.v)
		}
		l.verbosity = l.v
	}
	if err := c.ValidateLogging(); err != nil {
		return err
	}
	if fs.Changed("v") && !fs.Changed("log-level") {
		c.LogLevel = verbosityLevel(l.v)
	}
	return nil
}

// verbosityLevel is the slog level that shows klog's V(v) (which arrives as level -v) and
// nodeaddr's debug lines for v >= 1: info for 0, debug for 1 to 4, -v above (6: client-go's requests).
func verbosityLevel(v int) slog.Level {
	if v <= 0 {
		return slog.LevelInfo
	}
	return min(-slog.Level(v), slog.LevelDebug)
}
