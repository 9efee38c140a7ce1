package agentcmd

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"

	"github.com/spf13/pflag"
)

// FuzzParseFlags: any command line either parses or fails with exactly one line that names what is
// wrong; the parser never panics.
func FuzzParseFlags(f *testing.F) {
	for _, s := range []string{"--node-name=n", "--debounce=-1s", "--external-ip-target=1.1.1.1,8.8.8.8",
		"--internal-ip-target=::1", "--publish-rate=NaN", "--v=99", "--log-level=loud", "--bogus",
		"--dry-run=maybe", "--reconcile-interval=5s", "extra", "--timeout=0", "--metrics-bind-address=x"} {
		f.Add(s, "--node-name=n")
	}
	for _, s := range []string{"-v=3", "-v", "-node-name=a", "---x", "--", "-", "-vh", "--v 6",
		"--external-ip-subnet=192.0.2.0/24", "-logtostderr", "--log_dir=/x", "--debounce=fast"} {
		f.Add(s, "--node-name=n")
	}
	for _, s := range []string{"--a\nb", "--debounce=1\ns"} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		env := func(string) string { return "" }
		host := func() (string, error) { return "host", nil }
		o, err := parseFlags([]string{a, b}, env, host, io.Discard)
		switch {
		case err == nil:
			if o == nil {
				t.Fatal("nil options without error")
			}
		case errors.Is(err, pflag.ErrHelp):
		default:
			var ue cli.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %v is not a usage error", err)
			}
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
				t.Fatalf("usage error is not one line: %q", msg)
			}
		}
	})
}
