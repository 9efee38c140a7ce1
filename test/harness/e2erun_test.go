package harness

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// A report as the v1.37.2 framework writes it (framework/internal/junit: no failure message
// attribute, the failure's text as character data), trimmed to one case of each kind.
const junitSample = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" disabled="0" errors="0" failures="1" time="60">
  <testsuite name="Kubernetes e2e suite" package="/" tests="5" disabled="0" skipped="2" errors="0" failures="1" time="60">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1"></testcase>
    <testcase name="[It] [sig-node] Downward API should provide host IP as an env var [NodeConformance] [Conformance]" classname="Kubernetes e2e suite" status="passed" time="6"></testcase>
    <testcase name="[It] [sig-network] HostPort validates that there is no conflict [LinuxOnly] [Conformance]" classname="Kubernetes e2e suite" status="failed" time="40">
      <failure type="failed">[FAILED] Failed to connect to exposed host ports
In [It] at: hostport.go:166</failure>
    </testcase>
    <testcase name="[It] [sig-network] Networking Granular Checks: Services should function for node-Service: http" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped - Requires at least 2 nodes (not 1)"></skipped>
    </testcase>
    <testcase name="[It] [sig-apps] Deployment should run the lifecycle of a Deployment" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
  </testsuite>
</testsuites>`

func TestReadJUnit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "junit_01.xml")
	if err := os.WriteFile(file, []byte(junitSample), 0o644); err != nil {
		t.Fatal(err)
	}
	var r E2EResult
	focus := []string{"Downward API should provide host IP", "HostPort validates", "Networking Granular Checks: Services "}
	if err := r.readJUnit(file, focus, nil); err != nil {
		t.Fatal(err)
	}
	want := E2EResult{
		Passed: []string{"[sig-node] Downward API should provide host IP as an env var [NodeConformance] [Conformance]"},
		Failed: map[string]string{"[sig-network] HostPort validates that there is no conflict [LinuxOnly] [Conformance]": "[FAILED] Failed to connect to exposed host ports\nIn [It] at: hostport.go:166"},
		// The Deployment spec was filtered out by the focus, not skipped at run time.
		Skipped: map[string]string{"[sig-network] Networking Granular Checks: Services should function for node-Service: http": "skipped - Requires at least 2 nodes (not 1)"},
		Took: map[string]time.Duration{
			"[sig-node] Downward API should provide host IP as an env var [NodeConformance] [Conformance]": 6 * time.Second,
			"[sig-network] HostPort validates that there is no conflict [LinuxOnly] [Conformance]":         40 * time.Second,
		},
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("readJUnit:\n got %+v\nwant %+v", r, want)
	}
	if r.Run() != 2 {
		t.Errorf("Run() = %d, want 2", r.Run())
	}
}

func TestFocusRegexp(t *testing.T) {
	got := FocusRegexp([]string{"[sig-network] HostPort", "Services should"})
	if want := `\[sig-network\] HostPort|Services should`; got != want {
		t.Errorf("FocusRegexp = %q, want %q", got, want)
	}
}

func TestDeal(t *testing.T) {
	got := deal([]string{"a", "b", "c", "d", "e"}, 3)
	if want := [][]string{{"a", "d"}, {"b", "e"}, {"c"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("deal(5 into 3) = %v, want %v", got, want)
	}
	if got := deal([]string{"a"}, 3); !reflect.DeepEqual(got, [][]string{{"a"}}) {
		t.Errorf("deal(1 into 3) = %v, want one group", got)
	}
}
