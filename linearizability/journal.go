package linearizability

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// MaxLineBytes bounds one line of a journal; Decode refuses longer ones.
const MaxLineBytes = 4 << 20

// Encode writes ops to w as a journal: one JSON object per line, so a
// process can append each op with one write as it happens. It returns the
// first error of encoding or writing.
func Encode(w io.Writer, ops ...Op) error {
	for _, op := range ops {
		line, err := json.Marshal(op)
		if err != nil {
			return fmt.Errorf("encode op: %w", err)
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return fmt.Errorf("write op: %w", err)
		}
	}
	return nil
}

// Decode reads a journal written by Encode. A line whose (Client, Seq)
// matches an earlier line's, with Seq != 0, replaces it in place: a process
// writes its op with Unknown set before the call and again with the answer
// after it, so a process killed mid-call leaves the op unknown. A last line
// without its newline (cut by a kill) is ignored. Decode returns an error
// for any other line that is not an Op, or longer than MaxLineBytes.
func Decode(r io.Reader) ([]Op, error) {
	br := bufio.NewReader(r)
	var ops []Op
	at := map[[2]int64]int{}
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) {
			return ops, nil
		}
		if err != nil {
			return nil, fmt.Errorf("journal line %d: %w", lineNo, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(line, &op); err != nil {
			return nil, fmt.Errorf("journal line %d: %w", lineNo, err)
		}
		if op.Seq != 0 {
			id := [2]int64{int64(op.Client), op.Seq}
			if i, ok := at[id]; ok {
				ops[i] = op
				continue
			}
			at[id] = len(ops)
		}
		ops = append(ops, op)
	}
}

// readLine returns the next complete line without its newline, or io.EOF
// at the end of the input, including after a last line with no newline.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxLineBytes {
			return nil, fmt.Errorf("longer than %d bytes", MaxLineBytes)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, io.EOF // an unterminated last line was cut short
		default:
			return nil, err
		}
	}
}

// Merge returns the ops of several journals (one per process) as one
// history, ordered by call time; ops with equal call times keep their
// order, journals in argument order. Client ids must already be distinct
// across journals.
func Merge(journals ...[]Op) []Op {
	var all []Op
	for _, j := range journals {
		all = append(all, j...)
	}
	slices.SortStableFunc(all, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	return all
}
