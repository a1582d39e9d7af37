package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/statekit/statekit/state"
)

// maxCellRunes is the longest value dump shows whole without --full; a
// longer one is cut to its first maxCellRunes-4 characters (fewer when a
// quoted one would end inside an escape), then "…" and its length.
const maxCellRunes = 64

// table prints rows of fields. On a terminal it aligns them in columns under
// a header (printed with the first row); otherwise each row is one line of
// tab-separated fields and no header, for cut and awk (--json is the format
// for programs). Fields must not hold tabs or newlines: quote them with text
// first.
type table struct {
	w      io.Writer
	tw     *tabwriter.Writer
	header []string
}

// newTable starts a table with the given header.
func newTable(w io.Writer, tty bool, header ...string) *table {
	t := &table{w: w}
	if tty {
		t.tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		t.header = header
	}
	return t
}

// row prints one row, and returns the error of writing it (aligned rows
// are written by flush).
func (t *table) row(fields ...string) error {
	if t.tw == nil {
		_, err := fmt.Fprintln(t.w, strings.Join(fields, "\t"))
		return err
	}
	if t.header != nil {
		fmt.Fprintln(t.tw, strings.Join(t.header, "\t"))
		t.header = nil
	}
	fmt.Fprintln(t.tw, strings.Join(fields, "\t"))
	return nil
}

// flush writes out the aligned rows.
func (t *table) flush() error {
	if t.tw != nil {
		return t.tw.Flush()
	}
	return nil
}

// jsonLines writes one JSON object per line.
type jsonLines struct{ enc *json.Encoder }

func newJSONLines(w io.Writer) *jsonLines {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &jsonLines{enc: enc}
}

func (j *jsonLines) write(v any) error { return j.enc.Encode(v) }

// text shows s as it is when that is unambiguous on one line, and quoted
// the Go way otherwise: empty, not valid UTF-8, holding a control or other
// unprintable character, starting with a quote, or with space at either
// end.
func text(s string) string {
	if s == "" || !utf8.ValidString(s) || s[0] == '"' ||
		strings.TrimSpace(s) != s || strings.IndexFunc(s, notPrintable) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func notPrintable(r rune) bool { return !unicode.IsPrint(r) }

// quote quotes a key or name for a message, the Go way.
func quote(s string) string { return strconv.Quote(s) }

// cell shows a value in a column: text cut to maxCellRunes unless full,
// with its length in bytes when cut.
func cell(v state.Value, full bool) string {
	if v.IsInt() {
		return v.String()
	}
	raw := v.String()
	s := text(raw)
	if full || utf8.RuneCountInString(s) <= maxCellRunes {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", textStart(raw, s != raw, maxCellRunes-4), len(raw))
}

// textStart is the start of text(raw), at most n characters long, that
// ends between two of raw's characters: quoted says text quotes raw. A
// quoted start is the opening quote and the escapes of raw's first
// characters, none cut, so that with a closing quote it unquotes to the
// start of raw.
func textStart(raw string, quoted bool, n int) string {
	if !quoted {
		return string([]rune(raw)[:n])
	}
	var b strings.Builder
	b.WriteByte('"')
	for used, i := 1, 0; i < len(raw); {
		// strconv.Quote escapes each character, or byte that is not
		// UTF-8, on its own.
		_, size := utf8.DecodeRuneInString(raw[i:])
		esc := strconv.Quote(raw[i : i+size])
		esc = esc[1 : len(esc)-1]
		if used += utf8.RuneCountInString(esc); used > n {
			break
		}
		b.WriteString(esc)
		i += size
	}
	return b.String()
}

// typeName is a value's type as dump shows it.
func typeName(v state.Value) string {
	if v.IsInt() {
		return "integer"
	}
	return "bytes"
}

// dur prints a duration the way Go does, with three significant digits or
// so: 29.4s, 1m30s, 250ms, 38.2ms, 12µs.
func dur(d time.Duration) string {
	switch a := d.Abs(); {
	case a >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	case a >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// size prints a byte count for people: 512 B, 24.0 KiB, 3.1 MiB.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}

// millis returns d in milliseconds, for JSON.
func millis(d time.Duration) int64 { return d.Milliseconds() }

// jsonValue returns a value's JSON fields: an integer as a number, UTF-8
// bytes as a string, other bytes as base64.
func jsonValue(v state.Value) (value any, base64 []byte) {
	if n, ok := v.Int(); ok {
		return n, nil
	}
	if b := v.Bytes(); !utf8.Valid(b) {
		return nil, b
	}
	return v.String(), nil
}

// timeJSON is a time for JSON, in UTC, or nil for the zero time.
func timeJSON(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
