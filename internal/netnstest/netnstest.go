// Package netnstest runs a package's tests inside a throwaway network namespace, so kernel tests can
// add links, addresses and routes without touching the host.
//
// A test package calls Main from TestMain. As root with iproute2 present, Main creates a namespace,
// re-executes the test binary inside it with `ip netns exec`, and deletes the namespace afterwards.
// Tests that need the kernel call Require first: it skips loudly when the namespace could not be
// made, and fails instead when NODEADDR_E2E=require (CI), so a missing tool never hides as a skip.
package netnstest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const (
	envInside = "NODEADDR_NETNS"
	envSkip   = "NODEADDR_NETNS_SKIP"
)

// Main runs m inside a fresh network namespace when possible and returns the exit code.
func Main(m *testing.M) int {
	if os.Getenv(envInside) != "" {
		if err := exec.Command("ip", "link", "set", "lo", "up").Run(); err != nil {
			fmt.Fprintf(os.Stderr, "netnstest: bring up lo: %v\n", err)
			return 1
		}
		return m.Run()
	}
	if reason := unavailable(); reason != "" {
		os.Setenv(envSkip, reason)
		return m.Run()
	}
	name := fmt.Sprintf("nodeaddr-test-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		os.Setenv(envSkip, fmt.Sprintf("ip netns add: %v: %s", err, strings.TrimSpace(string(out))))
		return m.Run()
	}
	defer exec.Command("ip", "netns", "del", name).Run()
	cmd := exec.Command("ip", append([]string{"netns", "exec", name, os.Args[0]}, os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), envInside+"="+name)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "netnstest: %v\n", err)
		return 1
	}
	return 0
}

func unavailable() string {
	if os.Geteuid() != 0 {
		return "not root: network namespaces need root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "iproute2's ip command not found"
	}
	return ""
}

// Require skips t (or fails it under NODEADDR_E2E=require) unless it runs inside a test namespace.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv(envInside) != "" {
		return
	}
	reason := os.Getenv(envSkip)
	if reason == "" {
		reason = "TestMain did not call netnstest.Main"
	}
	SkipOrFail(t, "kernel test cannot run: "+reason)
}

// SkipOrFail skips t loudly with the reason, or fails it when NODEADDR_E2E=require (CI sets it),
// so a missing tool never hides behind a skip there. A skip appends "test<TAB>reason" to
// $NODEADDR_SKIP_LOG, if set, for the summary `make test` prints at the end (test/run-all). The
// test module's harness.SkipOrFail is this function.
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("NODEADDR_E2E") == "require" {
		t.Fatalf("%s (NODEADDR_E2E=require)", reason)
	}
	if path := os.Getenv("NODEADDR_SKIP_LOG"); path != "" {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%s\t%s\n", t.Name(), strings.ReplaceAll(reason, "\n", " "))
			f.Close()
		} // else: the summary is a convenience; the skip itself is in the test log
	}
	t.Skipf("SKIPPING: %s", reason)
}

// Name returns the namespace the tests run in.
func Name() string { return os.Getenv(envInside) }

// IP runs `ip args...` and fails t on error.
func IP(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// Sysctl writes value to /proc/sys/<key with dots as slashes>.
func Sysctl(t testing.TB, key, value string) {
	t.Helper()
	p := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		t.Fatalf("sysctl %s=%s: %v", key, value, err)
	}
}

// Veth creates a veth pair name<->name+"p", both up, and removes it when t ends.
func Veth(t testing.TB, name string) {
	t.Helper()
	IP(t, "link", "add", name, "type", "veth", "peer", "name", name+"p")
	t.Cleanup(func() { exec.Command("ip", "link", "del", name).Run() })
	IP(t, "link", "set", name+"p", "up")
	IP(t, "link", "set", name, "up")
}
