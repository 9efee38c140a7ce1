package conflictscmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
)

// Bad input to `nodeaddr conflicts` is a usage error (exit 2) naming the flag; --help and --version
// exit 0 without touching a cluster.
func TestConflictsUsage(t *testing.T) {
	env := func(string) string { return "" }
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "Usage: nodeaddr conflicts"},
		{[]string{"--version"}, 0, "nodeaddr "},
		{[]string{"--move-window=-1s"}, 2, "--move-window: -1s is negative"},
		{[]string{"--move-window=soon"}, 2, "--move-window"},
		{[]string{"--log-level=loud"}, 2, "--log-level: \"loud\""},
		{[]string{"--allowed-ip-prefixes=10.0.0.0/8"}, 2, "unknown flag: --allowed-ip-prefixes"},
		{[]string{"extra"}, 2, "unexpected arguments"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Main(context.Background(), cli.Env{Getenv: env, Stdout: &out, Stderr: &errOut, Version: "test", Revision: "unknown"}, tc.args)
			if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
				t.Fatalf("exit %d, output %q %q; want exit %d and %q", code, out.String(), errOut.String(), tc.code, tc.want)
			}
		})
	}
}

// The defaults: its own Lease and port, the window of conflicts.DefaultWindow, the namespace from
// POD_NAMESPACE.
func TestConflictsFlags(t *testing.T) {
	o, err := parse(nil, func(k string) string { return map[string]string{"POD_NAMESPACE": "infra"}[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.LeaseName != "nodeaddr-conflicts" || o.BindAddr != ":9814" || o.Window != 30*time.Second || o.Namespace != "infra" || !o.LeaderElect {
		t.Fatalf("options %+v", o)
	}
	if o, err = parse([]string{"--move-window=0"}, func(string) string { return "" }, nil); err != nil || o.Window != 0 {
		t.Fatalf("--move-window=0: %v %v", o, err)
	}
}
