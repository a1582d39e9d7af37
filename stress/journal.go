package stress

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
)

// journal is a worker's two append-only files: its ops, in the format
// linearizability.Decode reads, and its notes. Every goroutine of the
// worker, and the engine's goroutines through the flush and now hooks,
// write to it; each line goes out in one write under one lock, so lines
// never interleave and a kill can cut only the last one, which readers
// ignore. A write that fails (a full disk) may leave part of its line, so
// after it nothing more goes to that file: each later write returns its
// error.
type journal struct {
	mu              sync.Mutex
	ops             io.WriteCloser
	notes           io.WriteCloser
	opsErr, noteErr error // the first failed write of each file
	buf             bytes.Buffer
}

// openJournal opens (creating) the two files for appending.
func openJournal(opsPath, notesPath string) (*journal, error) {
	ops, err := os.OpenFile(opsPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	notes, err := os.OpenFile(notesPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		ops.Close()
		return nil, err
	}
	return &journal{ops: ops, notes: notes}, nil
}

// op appends one line of the op journal.
func (j *journal) op(op linearizability.Op) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf.Reset()
	if err := linearizability.Encode(&j.buf, op); err != nil {
		return err
	}
	return appendLine(j.ops, &j.opsErr, j.buf.Bytes())
}

// appendLine writes line to w unless a write to w failed before (*failed),
// and keeps the first error in *failed.
func appendLine(w io.Writer, failed *error, line []byte) error {
	if *failed != nil {
		return fmt.Errorf("an earlier write failed: %w", *failed)
	}
	if _, err := w.Write(line); err != nil {
		*failed = err
		return err
	}
	return nil
}

// note appends one line of the notes.
func (j *journal) note(n note) error {
	line, err := json.Marshal(n)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return appendLine(j.notes, &j.noteErr, append(line, '\n'))
}

func (j *journal) close() error {
	return errors.Join(j.ops.Close(), j.notes.Close())
}

// Kinds of note.
const (
	// noteBuffered: Client is about to call IncrBuffered(Key, Delta).
	noteBuffered = "buffered"
	// noteError: a call (Client, Seq; Seq 0 for IncrBuffered and Flush
	// outside the op journal) failed with Err, which the model has no
	// answer for.
	noteError = "error"
	// noteRefused: on Redis, a call (Client, Seq) or flush failed with an
	// error that says it was not applied (the server was unreachable or
	// refused it): the driver leaves the op out of the history, and
	// reports the note unless the server was down within [Call, Return].
	noteRefused = "refused"
	// noteUncertain: on Redis, a call or flush lost its reply
	// (ErrOutcomeUnknown): its op stays unknown, and the driver reports
	// the note unless the server was down within [Call, Return].
	noteUncertain = "uncertain"
)

// note is what a worker records beside its ops: the buffered increments
// its callers made, which no op shows until a flush takes them, and the
// errors the model has no kind for, with their text.
type note struct {
	Kind   string `json:"kind"`
	Client int    `json:"client"`
	Seq    int64  `json:"seq,omitempty"`
	Key    string `json:"key,omitempty"`
	Delta  int64  `json:"delta,omitempty"`
	Op     string `json:"op,omitempty"`
	Err    string `json:"err,omitempty"`
	Call   int64  `json:"call,omitempty"`   // CLOCK_MONOTONIC, of refused and uncertain calls
	Return int64  `json:"return,omitempty"` // CLOCK_MONOTONIC, of refused and uncertain calls
}

// readNotes reads a notes file; a missing file has none, and a last line
// without its newline (cut by a kill) is ignored.
func readNotes(path string) ([]note, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var out []note
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil // a line without its newline was cut short
		}
		if err != nil {
			return nil, err
		}
		var n note
		if err := json.Unmarshal(line, &n); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, lineNo, err)
		}
		out = append(out, n)
	}
}

// sortInputsByKey sorts ins by key, stably.
func sortInputsByKey(ins []model.Input) {
	slices.SortStableFunc(ins, func(a, b model.Input) int { return cmp.Compare(a.Key, b.Key) })
}
