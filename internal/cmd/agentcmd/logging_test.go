package agentcmd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
)

// --v=6 turns on client-go's request traces (klog V(6), through the slog handler); --v=2 does not,
// though the agent makes the same requests. The agent runs with --run-once against a local API
// endpoint that knows no Node, so it fails (exit 1) after its requests.
func TestVerbosityShowsClientGoRequests(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"%s not found"}`, r.URL.Path)
	}))
	defer srv.Close()
	kubeconfig := testKubeconfig(t, srv.URL)
	t.Cleanup(func() { cli.SetKlogVerbosity(0) })

	for _, tc := range []struct {
		v      string
		traced bool
	}{{"2", false}, {"6", true}} {
		t.Run("--v="+tc.v, func(t *testing.T) {
			before := requests.Load()
			code, _, stderr := runArgs(t, env(), "--v="+tc.v, "--kubeconfig="+kubeconfig, "--node-name=missing", "--run-once",
				"--timeout=1s", "--log-format=json", "--metrics-bind-address=0", "--health-probe-bind-address=0")
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if requests.Load() == before {
				t.Fatalf("no request reached the API endpoint; stderr:\n%s", stderr)
			}
			var traces []string
			for line := range strings.Lines(stderr) {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("stderr line %q is not JSON: %v", line, err)
				}
				url, _ := m["url"].(string)
				if m["msg"] == "Response" && m["verb"] != nil && strings.HasPrefix(url, srv.URL+"/api/v1/nodes") &&
					m["status"] == "404 Not Found" && m["level"] == "DEBUG-2" {
					traces = append(traces, line)
				}
			}
			if tc.traced && len(traces) == 0 {
				t.Errorf("--v=%s: no client-go Response line for %s/api/v1/nodes at level -6; stderr:\n%s", tc.v, srv.URL, stderr)
			}
			if !tc.traced && len(traces) > 0 {
				t.Errorf("--v=%s: client-go request traces shown: %q", tc.v, traces)
			}
		})
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
