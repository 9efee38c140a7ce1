package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/netnstest"
)

// readmeDemoHeading starts the README's hand demo: the first ```sh block after it is the demo.
const readmeDemoHeading = "### Renumber a host by hand"

// demoStep is one line of the demo's block: a command, or the JSON line the agent started by an
// earlier command prints next (a "#   {...}" comment under it).
type demoStep struct {
	cmd      string
	expected string
}

// readmeDemo returns the steps of the README's hand demo, in order.
func readmeDemo(t *testing.T) []demoStep {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+readmeDemoHeading)
	if !ok {
		t.Fatalf("README.md has no %q section", readmeDemoHeading)
	}
	_, block, ok := strings.Cut(section, "\n```sh\n")
	if !ok {
		t.Fatalf("README.md: no ```sh block after %q", readmeDemoHeading)
	}
	block, _, _ = strings.Cut(block, "\n```")
	var steps []demoStep
	for line := range strings.Lines(block) {
		line = strings.TrimSpace(line)
		comment, isComment := strings.CutPrefix(line, "#")
		switch {
		case line == "":
		case isComment && strings.HasPrefix(strings.TrimSpace(comment), "{"):
			// The JSON value alone, without what follows it ("(about 0.1 s later)").
			dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(comment)))
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("README.md demo: output line %q is not JSON: %v", line, err)
			}
			steps = append(steps, demoStep{expected: strings.TrimSpace(comment)[:dec.InputOffset()]})
		case isComment:
		default:
			steps = append(steps, demoStep{cmd: line})
		}
	}
	return steps
}

// The README's hand demo, run as written: every command of its block in order (the agent's in the
// background, as in the first terminal), and each "#   {...}" line must be the agent's next line
// on stdout, byte for byte. Three changes keep it off the user's own demo and make it run here: the
// namespace gets a name of its own instead of "demo", the binary goes to the test's temporary
// directory instead of /tmp/nodeaddr, and sudo is dropped (the test runs as root). A fresh
// namespace's loopback is down: the agent must start without opening a listener there.
func TestREADMEHandDemo(t *testing.T) {
	steps := readmeDemo(t)
	if os.Geteuid() != 0 {
		netnstest.SkipOrFail(t, "not root: network namespaces need root")
	}
	for _, tool := range []string{"ip", "go", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			netnstest.SkipOrFail(t, tool+" not found: the README's hand demo runs it")
		}
	}
	ns := fmt.Sprintf("nodeaddr-readme-%d", os.Getpid())
	bin := filepath.Join(t.TempDir(), "nodeaddr")
	nsName := regexp.MustCompile(`\bdemo\b`) // the namespace, not its links demo0 and demo1
	adapt := func(cmd string) string {
		cmd = strings.ReplaceAll(cmd, "sudo ", "")
		cmd = strings.ReplaceAll(cmd, "/tmp/nodeaddr", bin)
		return nsName.ReplaceAllLiteralString(cmd, ns)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() }) // a demo that stopped halfway

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var agent *exec.Cmd
	var lines chan string
	var stderr lockedBuffer // read while the agent writes it
	var expected int
	for _, s := range steps {
		switch {
		case s.expected != "":
			if agent == nil {
				t.Fatalf("README.md demo: output %s before any command started the agent", s.expected)
			}
			expected++
			select {
			case got, ok := <-lines:
				if !ok {
					t.Fatalf("the agent exited before printing %s: %v\nstderr:\n%s", s.expected, agent.Wait(), stderr.String())
				}
				if got != s.expected {
					t.Fatalf("the agent printed\n  %s\nwhere README.md shows\n  %s\nstderr:\n%s", got, s.expected, stderr.String())
				}
				t.Logf("the agent printed, as README.md shows: %s", got)
			case <-ctx.Done():
				t.Fatalf("the agent did not print %s: %v\nstderr:\n%s", s.expected, ctx.Err(), stderr.String())
			}
		case strings.Contains(s.cmd, "/tmp/nodeaddr ") && !strings.Contains(s.cmd, "-o /tmp/nodeaddr") && !strings.Contains(s.cmd, "--run-once"):
			// The agent (the built binary run, not built): it runs until stopped. exec: the
			// signal below reaches it, not a shell.
			agent = exec.CommandContext(ctx, "bash", "-c", "exec "+adapt(s.cmd))
			agent.Dir = filepath.Join("..", "..")
			agent.Stderr = &stderr
			out, err := agent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := agent.Start(); err != nil {
				t.Fatalf("%s: %v", s.cmd, err)
			}
			lines = make(chan string)
			go func() {
				defer close(lines)
				for sc := bufio.NewScanner(out); sc.Scan(); {
					lines <- sc.Text()
				}
			}()
			t.Logf("started in the background: %s", adapt(s.cmd))
		default:
			cmd := exec.CommandContext(ctx, "bash", "-ec", adapt(s.cmd))
			cmd.Dir = filepath.Join("..", "..")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("README.md demo: %s: %v\n%s", s.cmd, err, out)
			}
			t.Logf("ran: %s", adapt(s.cmd))
		}
	}
	if agent == nil || expected < 2 {
		t.Fatalf("README.md demo: %d expected output lines and agent started %v: want the agent and at least two lines (start, renumbering)", expected, agent != nil)
	}
	// The user stops the agent with Ctrl-C: a clean exit, no error logged, nothing more printed.
	if err := agent.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var extra []string
	for l := range lines {
		extra = append(extra, l)
	}
	if err := agent.Wait(); err != nil || len(extra) > 0 || strings.Contains(stderr.String(), "level=ERROR") {
		t.Errorf("the agent, stopped with SIGINT: %v; more output %q; stderr:\n%s", err, extra, stderr.String())
	}
}

// lockedBuffer is a strings.Builder that a process's output copier and the test may use at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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
