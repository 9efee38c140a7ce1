package harness

import (
	"os/exec"
	"runtime"
	"sync"
)

// The kernel sends a child its Pdeathsig when the thread that forked it ends, not the process
// (go.dev/issue/27505), and the Go runtime ends a thread whenever a goroutine locked to it exits
// locked. A child started from an ordinary goroutine could thus be SIGKILLed in the middle of a test
// by an unrelated goroutine that happened to run on that thread. So every child with a Pdeathsig is
// forked from one goroutine locked to its thread for the life of the test process. (The agent run
// unprivileged loses its Pdeathsig anyway: setpriv's change of user ID clears it.)

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

var (
	spawnOnce sync.Once
	spawns    chan spawnReq
)

// Spawn starts cmd from the spawner thread: for a child whose SysProcAttr has a Pdeathsig.
func Spawn(cmd *exec.Cmd) error { return spawn(cmd) }

// spawn starts cmd from the spawner thread.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawns = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for r := range spawns {
				r.err <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawns <- spawnReq{cmd: cmd, err: errc}
	return <-errc
}
