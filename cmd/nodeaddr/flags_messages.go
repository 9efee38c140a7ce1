package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// migrationDoc is where every flag local-ccm takes and nodeaddr does not is explained.
const migrationDoc = `docs/upgrade.md, "Migrating from local-ccm"`

// localCCMHints are local-ccm's flags that nodeaddr does not take, with what to do instead. A
// DaemonSet carried over from local-ccm stops on them, so the one line it prints must say more than
// "unknown flag". The klog flags are those local-ccm registers through klog.InitFlags; names are
// listed with dashes (klog's own spelling has underscores: localCCMHint accepts both).
var localCCMHints = map[string]string{
	"external-ip-subnet": "use --external-ip-cidrs=CIDR (the address in that subnet, on any interface) or an --external-ip-target routed through it",
	"logtostderr":        "nodeaddr always logs to stderr: drop it (--log-format=json for JSON)",
	"alsologtostderr":    "nodeaddr always logs to stderr: drop it",
	"stderrthreshold":    "nodeaddr always logs to stderr: drop it (--log-level sets the level)",
	"log-dir":            "nodeaddr logs only to stderr: drop it",
	"log-file":           "nodeaddr logs only to stderr: drop it",
	"log-file-max-size":  "nodeaddr logs only to stderr: drop it",
	"skip-headers":       "drop it (--log-format=json for structured lines)",
	"skip-log-headers":   "drop it (--log-format=json for structured lines)",
	"add-dir-header":     "drop it (--log-format=json for structured lines)",
	"one-output":         "drop it",
	"log-backtrace-at":   "drop it",
	"vmodule":            "use --v=N or --log-level (one level for the whole program)",
}

// localCCMHint is the message for a flag local-ccm takes and nodeaddr does not ("" for others).
// dashes is how the user wrote it ("--" or "-").
func localCCMHint(dashes, name string) string {
	name, _, _ = strings.Cut(name, "=")
	hint, ok := localCCMHints[strings.ReplaceAll(name, "_", "-")]
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s%s: local-ccm's flag, not nodeaddr's: %s (%s)", dashes, name, hint, migrationDoc)
}

// flagMessage rewrites pflag's errors into "--name: problem" lines, as they read with the flag
// package before (the messages are part of the interface: scripts and docs quote them).
func flagMessage(fs *pflag.FlagSet, err error) string {
	var notExist *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	var required *pflag.ValueRequiredError
	switch {
	case errors.As(err, &invalid):
		return invalidValueMessage(invalid)
	case errors.As(err, &required):
		return "--" + required.GetFlag().Name + " needs a value"
	case errors.As(err, &notExist) && notExist.GetSpecifiedShortnames() == "":
		if hint := localCCMHint("--", notExist.GetSpecifiedName()); hint != "" {
			return hint
		}
		return "unknown flag --" + notExist.GetSpecifiedName()
	case errors.As(err, &notExist):
		// -name: one dash, which the flag package accepted for long flags and pflag does not.
		name, _, _ := strings.Cut(notExist.GetSpecifiedShortnames(), "=")
		if fs.Lookup(name) != nil {
			return fmt.Sprintf("-%s: long flags take two dashes: --%s", name, name)
		}
		if hint := localCCMHint("-", name); hint != "" {
			return hint
		}
		return "unknown flag -" + name
	}
	return err.Error()
}

// invalidValueMessage names the flag, the value and what a valid one looks like, with an example
// the user can copy: the flag's default, or a typical value when the default is zero.
func invalidValueMessage(invalid *pflag.InvalidValueError) string {
	f := invalid.GetFlag()
	msg := fmt.Sprintf("--%s: invalid value %q: ", f.Name, invalid.GetValue())
	if errors.Is(invalid, strconv.ErrRange) {
		return msg + "value out of range"
	}
	var want, example string
	switch f.Value.Type() {
	case "duration":
		want, example = "not a duration (a number with a unit: ms, s, m or h)", "10s"
	case "bool":
		want, example = "not true or false", "true"
	case "int":
		want, example = "not an integer", "1"
	case "float64":
		want, example = "not a number", "1"
	default:
		return msg + "parse error"
	}
	if d := f.DefValue; d != "" && d != "0" && d != "0s" && d != "false" {
		example = d
	}
	return fmt.Sprintf("%s%s, e.g. --%s=%s", msg, want, f.Name, example)
}
