package approvercmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
)

// Bad input to `nodeaddr approver` is a usage error (exit 2) naming the flag; --help and --version
// exit 0 without touching a cluster.
func TestApproverUsage(t *testing.T) {
	env := func(string) string { return "" }
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "Usage: nodeaddr approver"},
		{[]string{"--version"}, 0, "nodeaddr "},
		{[]string{"--service-cidr=10.96.0.0/33"}, 2, "--service-cidr: \"10.96.0.0/33\" is not a CIDR"},
		{[]string{"--allowed-ip-prefixes=10.0.0.1"}, 2, "--allowed-ip-prefixes: \"10.0.0.1\" is not a CIDR"},
		{[]string{"--allowed-dns-suffixes=*.example"}, 2, "--allowed-dns-suffixes"},
		{[]string{"--max-sans=0"}, 2, "--max-sans and --max-pending-per-node must be at least 1"},
		{[]string{"--log-level=loud"}, 2, "--log-level: \"loud\""},
		{[]string{"--log-format=xml"}, 2, "--log-format: \"xml\""},
		{[]string{"--no-such-flag"}, 2, "unknown flag: --no-such-flag"},
		{[]string{"extra"}, 2, "unexpected arguments"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, env, &out, &errOut)
			if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
				t.Fatalf("exit %d, output %q %q; want exit %d and %q", code, out.String(), errOut.String(), tc.code, tc.want)
			}
		})
	}
}

// The flags reach the policy; the Lease's namespace comes from POD_NAMESPACE when not given.
func TestApproverFlags(t *testing.T) {
	o, err := parse([]string{"--allowed-dns-suffixes=example.internal", "--allowed-ip-prefixes=10.0.0.0/8,fd00::/8",
		"--service-cidr=10.96.0.1/12", "--max-sans=4"}, func(k string) string { return map[string]string{"POD_NAMESPACE": "infra"}[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintln(o.Namespace, o.Policy.DNSSuffixes, o.Policy.IPPrefixes, o.ServiceCIDRs, o.Policy.MaxSANs, o.Policy.MaxPendingPerNode, o.LeaderElect)
	if want := "infra [example.internal] [10.0.0.0/8 fd00::/8] [10.96.0.0/12] 4 10 true\n"; got != want {
		t.Fatalf("options %s, want %s", got, want)
	}
}

// testKubeconfig writes a kubeconfig for an API server at url (token auth, no TLS).
func testKubeconfig(t *testing.T, url string) string {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, url), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// While the API server cannot answer (503), the approver waits, live but not ready, and a SIGTERM
// ends it cleanly; an API server that refuses it (403) ends it at once, exit 1.
func TestApproverWaitsForTheAPIServer(t *testing.T) {
	var code, requests atomic.Int32
	code.Store(http.StatusServiceUnavailable)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		c := int(code.Load())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(c)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":"%s: %d"}`,
			strings.ReplaceAll(http.StatusText(c), " ", ""), c, r.URL.Path, c)
	}))
	defer srv.Close()
	kubeconfig := testKubeconfig(t, srv.URL)
	port := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	ctx, stop := context.WithCancel(t.Context())
	var errOut lockedBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"--kubeconfig=" + kubeconfig, fmt.Sprintf("--bind-address=127.0.0.1:%d", port)}, env(), io.Discard, &errOut)
	}()
	for deadline := time.Now().Add(10 * time.Second); strings.Count(errOut.String(), "level=WARN") < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no two WARNs within 10s:\n%s", errOut.String())
		}
	}
	if c, body := get("/healthz"); c != http.StatusOK {
		t.Errorf("/healthz %d %q while waiting, want 200", c, body)
	}
	if c, body := get("/readyz"); c != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for the API server") {
		t.Errorf("/readyz %d %q while waiting, want 503 waiting for the API server", c, body)
	}
	stop()
	if c := <-done; c != 0 {
		t.Errorf("exit %d after the context ended, want 0:\n%s", c, errOut.String())
	}
	if log := errOut.String(); !strings.Contains(log, `msg="the API server does not answer yet; retrying"`) ||
		!strings.Contains(log, "retry_in=200ms") || !strings.Contains(log, "retry_in=400ms") || strings.Contains(log, "level=ERROR") {
		t.Errorf("log:\n%s\nwant WARNs with the next delays, no ERROR", log)
	}

	code.Store(http.StatusForbidden)
	requests.Store(0)
	var out bytes.Buffer
	start := time.Now()
	c := run(t.Context(), []string{"--kubeconfig=" + kubeconfig, "--bind-address=0"}, env(), io.Discard, &out)
	if log := out.String(); c != 1 || time.Since(start) > 5*time.Second || strings.Contains(log, "level=WARN") ||
		!strings.Contains(log, `msg="nodeaddr approver failed"`) || !strings.Contains(log, "discover networking.k8s.io/v1") || requests.Load() != 1 {
		t.Errorf("exit %d after %s and %d requests, log:\n%s\nwant exit 1 at once, nodeaddr approver failed", c, time.Since(start), requests.Load(), log)
	}
}

// run is `nodeaddr approver ARGS` as main runs it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return Main(ctx, cli.Env{Getenv: getenv, Stdout: stdout, Stderr: stderr, Version: "test", Revision: "unknown"}, args)
}

func env() func(string) string { return func(string) string { return "" } }

// lockedBuffer is a bytes.Buffer the approver's goroutines and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
