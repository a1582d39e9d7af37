package childproc

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// The kernel sends the parent-death signal when the thread that forked
// the child exits, not the process (golang/go#27505), and Go ends a thread
// when a goroutine locked to it returns: a child forked from such a
// thread, or from one a goroutine locks later and returns on, would be
// killed while its parent runs on. So every child is forked from one
// thread kept for it: spawnLoop locks itself to its thread and never
// returns, and no other goroutine can run on a locked thread. That thread
// ends only with the process, which is when the children should go.
var (
	spawnOnce sync.Once
	spawns    chan func()
)

// start sets cmd's parent-death signal and starts it on the spawn thread.
func start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	var err error
	onSpawnThread(func() { err = cmd.Start() })
	return err
}

// onSpawnThread runs f on the spawn thread and returns when it is done.
func onSpawnThread(f func()) {
	spawnOnce.Do(func() {
		spawns = make(chan func())
		go spawnLoop()
	})
	done := make(chan struct{})
	spawns <- func() { f(); close(done) }
	<-done
}

// spawnLoop runs the functions sent on spawns, on its own thread, for the
// life of the process.
func spawnLoop() {
	runtime.LockOSThread() // never unlocked, and spawnLoop never returns
	for f := range spawns {
		f()
	}
}

// Running reports whether pid names a process that has not exited: one
// that exists and is not a zombie (a zombie has exited and waits only to
// be reaped, which may never come when it was left to an init that does
// not reap).
func Running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and
	// may itself hold spaces or parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	switch b[i+2] {
	case 'Z', 'X', 'x':
		return false
	}
	return true
}
