// Package childproc starts the helper processes of statekit's test,
// simulator and benchmark programs (a redis-server, statesim's workers,
// statebench's children) so that none outlives the process that started
// it. On Linux the kernel sends the child SIGKILL when its parent dies,
// even of SIGKILL (a CI timeout, the OOM killer), when no deferred cleanup
// runs. Elsewhere Start is cmd.Start, and a child may run on after its
// parent was killed.
package childproc

import "os/exec"

// Start starts cmd as cmd.Start does, but on Linux with SIGKILL as its
// parent-death signal (cmd.SysProcAttr's other fields, such as Setpgid,
// are kept). The caller waits for cmd as usual.
func Start(cmd *exec.Cmd) error { return start(cmd) }
