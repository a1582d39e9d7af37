package faults_test

import (
	"fmt"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state/vfs"
)

// A power loss keeps what was synced and loses the rest. A new file's
// directory entry is durable once its directory is synced.
func ExampleMemFS_PowerLoss() {
	m := faults.NewMemFS(1)
	p := m.Process(1)
	f, err := p.Open("db", vfs.OpenReadWrite|vfs.OpenCreate)
	if err != nil {
		panic(err)
	}
	if err := p.SyncDir("db"); err != nil {
		panic(err)
	}
	_, _ = f.WriteAt([]byte("synced"), 0)
	_ = f.Sync()
	_, _ = f.WriteAt([]byte("SYNCED, then lost"), 0)

	m.PowerLoss(faults.LossDrop)
	_, err = f.ReadAt(make([]byte, 1), 0)
	fmt.Println(err)

	m.Reboot()
	g, err := m.Process(1).Open("db", vfs.OpenReadOnly)
	if err != nil {
		panic(err)
	}
	size, _ := g.Size()
	b := make([]byte, size)
	_, _ = g.ReadAt(b, 0)
	fmt.Println(string(b))
	// Output:
	// read "db": process 1: power is off: faults: power lost
	// synced
}
