package verdict

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
)

// GraceFlag defines the remediator's --grace on fs, into p: one definition for the remediator and
// for `kubectl nodeaddr stale`, which reads it from the remediator's Deployment (RemediatorGrace).
func GraceFlag(fs *pflag.FlagSet, p *time.Duration) {
	fs.DurationVar(p, "grace", DefaultGrace, "how long a Node's new addresses must hold before its stale hostNetwork pods are evicted (a flap or a failover and back within it evicts nothing)")
}

// RemediatorGrace is the grace a remediator started with args runs with, parsed as it parses them
// (the last --grace wins: an overlay appends its own after the base's; its other flags are
// ignored), as rules.ApproverPolicy does for the approver. An error is a grace the remediator
// refuses, so it does not run.
func RemediatorGrace(args []string) (time.Duration, error) {
	fs := pflag.NewFlagSet("remediator", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.SetOutput(io.Discard)
	var grace time.Duration
	GraceFlag(fs, &grace)
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	if grace <= 0 {
		return 0, fmt.Errorf("--grace: %s is not a positive duration", grace)
	}
	return grace, nil
}
