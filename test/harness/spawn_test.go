package harness

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// A child started by a goroutine that then exits locked to its thread, so that the runtime ends
// that thread, keeps running: it was forked from the spawner's thread, and its Pdeathsig waits for
// the test process. Forked from the ending thread, it is SIGKILLed at once (checked by starting it
// with cmd.Start instead of spawn: this test then fails).
func TestChildOutlivesTheStartersThread(t *testing.T) {
	for attempt := 0; attempt < 10; attempt++ {
		type started struct {
			p   *proc
			tid int
		}
		c := make(chan started, 1)
		go func() {
			runtime.LockOSThread() // exits locked: the runtime ends this thread (the main thread aside)
			p, err := startProc(exec.Command("sleep", "30"))
			if err != nil {
				t.Error(err)
			}
			c <- started{p, syscall.Gettid()}
		}()
		s := <-c
		if s.p == nil {
			t.FailNow()
		}
		if !threadEnds(s.tid) { // it ran on the main thread, which the runtime keeps: try again
			s.p.stop()
			continue
		}
		select {
		case <-s.p.done:
			t.Fatalf("the child died with its starter's thread: %v", s.p.cmd.ProcessState)
		case <-time.After(500 * time.Millisecond):
		}
		s.p.stop()
		return
	}
	t.Fatal("no starter thread ended in 10 attempts")
}

// threadEnds reports whether the test process's thread tid is gone within a second.
func threadEnds(tid int) bool {
	return Poll(time.Second, 10*time.Millisecond, "thread ends", func() (bool, string) {
		_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid))
		return err != nil, "present"
	}) == nil
}
