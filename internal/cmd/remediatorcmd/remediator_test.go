package remediatorcmd

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/remediation/verdict"
)

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return Main(ctx, cli.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr, Version: "test", Revision: "unknown"}, args)
}

func TestRemediatorFlags(t *testing.T) {
	env := func(k string) string { return map[string]string{"POD_NAMESPACE": "nodeaddr-system"}[k] }
	o, err := parse([]string{"--grace=2m", "--max-evictions-per-node=2", "--max-evictions=50"}, env, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Grace != 2*time.Minute || o.MaxPerNode != 2 || o.MaxInFlight != 50 || o.Namespace != "nodeaddr-system" ||
		o.LeaseName != "nodeaddr-remediator" || o.BindAddr != ":9814" || !o.LeaderElect {
		t.Errorf("options = %+v", o)
	}
	if o, _ = parse(nil, env, &bytes.Buffer{}); o.Grace != verdict.DefaultGrace || o.MaxPerNode != 1 || o.MaxInFlight != 10 {
		t.Errorf("defaults = %+v", o)
	}
}

// Bad input is a usage error (exit 2) naming the command; --help and --version exit 0 without a
// cluster.
func TestRemediatorUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "Usage: nodeaddr remediator"},
		{[]string{"--version"}, 0, "nodeaddr test (revision unknown)"},
		{[]string{"--grace=0s"}, 2, "nodeaddr remediator: --grace: 0s is not a positive duration"},
		{[]string{"--max-evictions=0"}, 2, "nodeaddr remediator: --max-evictions-per-node and --max-evictions must be at least 1"},
		{[]string{"--max-evictions-per-node=-1"}, 2, "nodeaddr remediator: --max-evictions-per-node and --max-evictions must be at least 1"},
		{[]string{"extra"}, 2, "nodeaddr remediator: unexpected arguments"},
		{[]string{"--log-level=loud"}, 2, "nodeaddr remediator: --log-level: \"loud\""},
		{[]string{"--nope"}, 2, "nodeaddr remediator: unknown flag: --nope"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, func(string) string { return "" }, &out, &errOut)
			if code != tc.code || !strings.HasPrefix(out.String()+errOut.String(), tc.want) {
				t.Fatalf("exit %d, output %q %q; want exit %d and %q", code, out.String(), errOut.String(), tc.code, tc.want)
			}
		})
	}
}
