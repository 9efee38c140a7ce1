package main

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestExitCodes: stale exits 0 when nothing is stale and 1 when something is; every command exits 3
// when it cannot tell (API server unreachable, forbidden, a named Node not found), so that a
// script waiting for exit 0 stops instead of waiting forever.
func TestExitCodes(t *testing.T) {
	kc := kubeconfig(t, startAPI(t, scene()...).URL)
	forbidden := kubeconfig(t, startForbidding(t, "*").URL)
	podsForbidden := kubeconfig(t, startForbidding(t, "pods", scene()...).URL)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := kubeconfig(t, "http://"+ln.Addr().String())
	ln.Close()
	const forbiddenLine = `Error from server (Forbidden): nodes is forbidden: User "nobody" cannot list resource "nodes" in API group "" at the cluster scope` + "\n"
	tests := []struct {
		args   []string
		code   int
		stderr string // a substring
	}{
		{[]string{"stale", "--kubelet-certs=false", "--kubeconfig", kc}, exitStale, ""},
		{[]string{"stale", "--kubelet-certs=false", "node-b", "--kubeconfig", kc}, exitOK, "Nothing names an old address.\n"},
		{[]string{"stale", "--kubelet-certs=false", "node-x", "--kubeconfig", kc}, exitCannotTell, "Error from server (NotFound): the server could not find /api/v1/nodes/node-x\n"},
		{[]string{"stale", "--kubeconfig", forbidden}, exitCannotTell, forbiddenLine},
		{[]string{"stale", "--kubeconfig", podsForbidden}, exitCannotTell, `Error from server (Forbidden): list pods: pods is forbidden: User "nobody" cannot list resource "pods"`},
		// --watch too: it ends when a first list fails, instead of retrying until interrupted.
		{[]string{"stale", "--watch", "--kubeconfig", forbidden}, exitCannotTell, forbiddenLine},
		{[]string{"stale", "--watch", "--kubeconfig", podsForbidden}, exitCannotTell, `Error from server (Forbidden): failed to list *v1.Pod: pods is forbidden`},
		{[]string{"stale", "--watch", "--kubeconfig", closed}, exitCannotTell, "connect: connection refused\n"},
		{[]string{"stale", "--watch", "node-x", "--kubeconfig", kc}, exitCannotTell, "Error from server (NotFound): the server could not find /api/v1/nodes/node-x\n"},
		{[]string{"status", "--kubeconfig", forbidden}, exitCannotTell, forbiddenLine},
		{[]string{"explain", "node-a", "--kubeconfig", forbidden}, exitCannotTell, forbiddenLine},
		{[]string{"stale", "--kubeconfig", closed}, exitCannotTell, "connect: connection refused\n"},
		{[]string{"status", "-o", "json", "--kubeconfig", closed}, exitCannotTell, "connect: connection refused\n"},
	}
	for _, tt := range tests {
		stdout, stderr, code := runPlugin(tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.stderr) || (code == exitCannotTell && stdout != "") {
			t.Errorf("%q: exit %d (want %d), stderr %q (want %q in it), stdout %q", tt.args, code, tt.code, stderr, tt.stderr, stdout)
		}
	}
}

// TestMissingKubeconfig: a kubeconfig the user names that does not exist is an error (exit 3) with
// kubectl's message, not a silent fallback to localhost:8080; a KUBECONFIG list merges the files
// that exist, as kubectl does.
func TestMissingKubeconfig(t *testing.T) {
	kc := kubeconfig(t, startAPI(t, scene()...).URL)
	tests := []struct {
		env    string
		args   []string
		code   int
		stderr string
	}{
		{"/nonexistent", nil, exitCannotTell, "error: Config not found: /nonexistent\n"},
		{"/nonexistent:/missing/too", nil, exitCannotTell, "error: Config not found: /nonexistent, /missing/too\n"},
		{kc, []string{"--kubeconfig", "/nonexistent"}, exitCannotTell, "error: stat /nonexistent: no such file or directory\n"},
		{"/nonexistent:" + kc, []string{"node-b"}, exitOK, "Nothing names an old address.\n"},
	}
	for _, tt := range tests {
		t.Setenv("KUBECONFIG", tt.env)
		stdout, stderr, code := runPlugin(append([]string{"stale", "--kubelet-certs=false"}, tt.args...)...)
		if code != tt.code || stderr != tt.stderr || stdout != "" {
			t.Errorf("KUBECONFIG=%s stale %q: exit %d (want %d), stderr %q (want %q), stdout %q", tt.env, tt.args, code, tt.code, stderr, tt.stderr, stdout)
		}
	}
}

// TestVerbosity: -v (and --v) is kubectl's verbosity: at 6 client-go logs each request with its
// status, at 0 nothing; --version still prints the version.
func TestVerbosity(t *testing.T) {
	kc := kubeconfig(t, startAPI(t, scene()...).URL)
	var log bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&log)
	t.Cleanup(func() { klog.LogToStderr(true) })
	for _, args := range [][]string{{"-v=6"}, {"--v", "6"}, {"-v", "6"}} {
		log.Reset()
		if _, stderr, code := runPlugin(append([]string{"status", "node-a", "--kubeconfig", kc}, args...)...); code != exitOK {
			t.Fatalf("%q: exit %d, %s", args, code, stderr)
		}
		for _, want := range []string{`] "Response" verb="GET" url="http://127.0.0.1:`, `/api/v1/nodes/node-a" status="200 OK" milliseconds=`,
			`/api/v1/pods?labelSelector=app.kubernetes.io%2Fname%3Dnodeaddr" status="200 OK"`} {
			if !strings.Contains(log.String(), want) {
				t.Errorf("status %q logged:\n%s\nwant a line with %s", args, log.String(), want)
			}
		}
	}
	log.Reset()
	if _, _, code := runPlugin("status", "node-a", "--kubeconfig", kc); code != exitOK || log.Len() != 0 {
		t.Errorf("status without -v: exit %d, logged:\n%s", code, log.String())
	}
	if stdout, _, code := runPlugin("--version"); code != exitOK || stdout != "kubectl nodeaddr version dev (revision unknown)\n" {
		t.Errorf("--version: exit %d, %q", code, stdout)
	}
}
