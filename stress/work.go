package stress

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"time"

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
)

// contendWindow is how long after a lease call returned the counter keeps
// it, to pair it with calls of other processes read later: journals are
// read at different moments while a run goes on. Pairs further apart are
// missed while the run goes on (it then runs a little longer) and found in
// the count of the whole history.
const contendWindow = 2 * time.Second

// opID names an op: its client and call number.
type opID struct {
	client int
	seq    int64
}

// leaseCall is a Lease call whose answer is known.
type leaseCall struct {
	id        opID
	proc      int
	call, ret int64
	granted   bool
}

// workCount counts the work in known ops fed to it in any order: grants,
// contended grants and swept keys (Work), and sweeps. A grant of a Lease
// alone is contended when its call overlaps a Lease call of another
// process on the same lease, whatever that call answered. Grants inside an
// Update count as grants; they hold the write lock from their BEGIN and
// cannot interleave with another grant.
type workCount struct {
	procOf    func(client int) int
	sweeper   func(client int) bool
	recent    map[string][]leaseCall
	counted   map[opID]bool
	grants    int
	contended int
	sweeps    int // sweeps that deleted keys
	swept     int
}

// newWorkCount returns a count that tells processes apart with procOf and
// the clients that record sweep statements with sweeper.
func newWorkCount(procOf func(client int) int, sweeper func(client int) bool) *workCount {
	return &workCount{procOf: procOf, sweeper: sweeper, recent: map[string][]leaseCall{}, counted: map[opID]bool{}}
}

// add counts op.
func (c *workCount) add(op linearizability.Op) {
	if op.Event != linearizability.Verb || op.Unknown {
		return
	}
	switch {
	case op.Input.Kind == model.Del && c.sweeper(op.Client) && len(op.Input.Keys) > 0:
		c.sweeps++
		c.swept += len(op.Input.Keys)
		return
	case op.Input.Kind == model.Sweep && op.Output.Err == model.ErrNone && op.Output.N > 0:
		c.sweeps++
		c.swept += op.Output.N
		return
	}
	c.grants += len(checks.Grants([]linearizability.Op{op}))
	if op.Input.Kind != model.Lease {
		return
	}
	lc := leaseCall{id: opID{op.Client, op.Seq}, proc: c.procOf(op.Client), call: op.Call, ret: op.Return,
		granted: op.Output.Err == model.ErrNone}
	name := op.Input.Key
	kept := c.recent[name][:0]
	for _, r := range c.recent[name] {
		if r.ret >= lc.call-int64(contendWindow) {
			kept = append(kept, r)
		}
	}
	for _, r := range kept {
		if r.proc == lc.proc || r.ret < lc.call || lc.ret < r.call {
			continue
		}
		for _, g := range []leaseCall{lc, r} {
			if g.granted && !c.counted[g.id] {
				c.counted[g.id] = true
				c.contended++
			}
		}
	}
	c.recent[name] = append(kept, lc)
}

// tail reads a journal while its worker still writes it: each read
// returns the lines completed since the last.
type tail struct {
	path string
	f    *os.File
	rest []byte
	buf  []byte
}

// counted marks the journal lines the work counts look at: of calls that
// may grant a lease, and of sweeps. Decoding every line while the run goes
// on would take CPU from the workers.
var counted = [][]byte{[]byte(`"durability":"full"`), []byte(`"kind":"del"`), []byte(`"kind":"sweep"`)}

// read feeds fn every op completed since the last read whose line may
// grant a lease or record a sweep. A journal not yet created has none.
func (t *tail) read(fn func(linearizability.Op)) error {
	if t.f == nil {
		f, err := os.Open(t.path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		t.f, t.buf = f, make([]byte, 64<<10)
	}
	for {
		n, err := t.f.Read(t.buf)
		t.rest = append(t.rest, t.buf[:n]...)
		if errors.Is(err, io.EOF) || n == 0 {
			break
		}
		if err != nil {
			return err
		}
	}
	for {
		i := bytes.IndexByte(t.rest, '\n')
		if i < 0 {
			break
		}
		line := t.rest[:i]
		t.rest = t.rest[i+1:]
		if !slices.ContainsFunc(counted, func(mark []byte) bool { return bytes.Contains(line, mark) }) {
			continue
		}
		var op linearizability.Op
		if err := json.Unmarshal(line, &op); err != nil {
			return err
		}
		fn(op)
	}
	t.rest = append(t.buf[:0:0], t.rest...)
	return nil
}

func (t *tail) close() {
	if t.f != nil {
		t.f.Close()
	}
}
