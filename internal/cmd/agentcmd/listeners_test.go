package agentcmd

import (
	"errors"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
)

func TestListenerFlags(t *testing.T) {
	o, err := parse([]string{"--node-name=a"}, env())
	if err != nil {
		t.Fatal(err)
	}
	if !o.metricsSecure || o.tlsCertFile != "" || o.tlsKeyFile != "" || o.probeAddr != "127.0.0.1:9811" {
		t.Errorf("defaults: secure %v cert %q key %q probes %q", o.metricsSecure, o.tlsCertFile, o.tlsKeyFile, o.probeAddr)
	}
	// Scrapers' tokens are audience-bound by default (so that a scraper's token replayed against the
	// API server is refused); empty restores the API server's own audiences.
	if got := o.audiences(); len(got) != 1 || got[0] != "nodeaddr" {
		t.Errorf("default audiences %q, want [nodeaddr]", got)
	}
	if o, err := parse([]string{"--node-name=a", "--metrics-token-audience="}, env()); err != nil || o.audiences() != nil {
		t.Errorf("--metrics-token-audience=: audiences %q, %v; want none", o.audiences(), err)
	}
	for _, tc := range []struct {
		args []string
		err  string // "" accepted
	}{
		{[]string{"--metrics-secure=false", "--metrics-bind-address=127.0.0.1:9810"}, ""},
		{[]string{"--metrics-secure=false", "--metrics-bind-address=[::1]:9810"}, ""},
		{[]string{"--metrics-secure=false", "--metrics-bind-address=0"}, ""},
		{[]string{"--metrics-secure=false"}, `--metrics-secure=false serves /metrics to anyone: --metrics-bind-address ":9810" must be a loopback address`},
		{[]string{"--metrics-secure=false", "--metrics-bind-address=0.0.0.0:9810"}, "must be a loopback address"},
		{[]string{"--metrics-secure=false", "--metrics-bind-address=localhost:9810"}, "must be a loopback address"},
		{[]string{"--tls-cert-file=/c.pem", "--tls-private-key-file=/k.pem"}, ""},
		{[]string{"--tls-cert-file=/c.pem"}, "--tls-cert-file and --tls-private-key-file go together"},
		{[]string{"--tls-private-key-file=/k.pem"}, "--tls-cert-file and --tls-private-key-file go together"},
		{[]string{"--metrics-secure=false", "--metrics-bind-address=127.0.0.1:1", "--tls-cert-file=/c.pem", "--tls-private-key-file=/k.pem"}, "--tls-cert-file: needs --metrics-secure"},
	} {
		_, err := parse(append([]string{"--node-name=a"}, tc.args...), env())
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
		case tc.err != "":
			var ue cli.UsageError
			if !errors.As(err, &ue) {
				t.Errorf("%v: %T is not a usage error (exit 2)", tc.args, err)
			}
		}
	}
}
