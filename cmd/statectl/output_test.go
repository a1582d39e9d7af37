package main

import (
	"bytes"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTableAlignsOnATerminalOnly(t *testing.T) {
	rows := [][]string{{"rate:client-42", "integer", "41.3s", "3"}, {"config", "bytes", "-", "v2"}}

	var tty bytes.Buffer
	tb := newTable(&tty, true, "KEY", "TYPE", "TTL", "VALUE")
	for _, r := range rows {
		tb.row(r...)
	}
	require.NoError(t, tb.flush())
	assert.Equal(t, ""+
		"KEY             TYPE     TTL    VALUE\n"+
		"rate:client-42  integer  41.3s  3\n"+
		"config          bytes    -      v2\n", tty.String())

	var pipe bytes.Buffer
	tb = newTable(&pipe, false, "KEY", "TYPE", "TTL", "VALUE")
	for _, r := range rows {
		tb.row(r...)
	}
	require.NoError(t, tb.flush())
	assert.Equal(t, "rate:client-42\tinteger\t41.3s\t3\nconfig\tbytes\t-\tv2\n", pipe.String(),
		"piped: tab-separated, no header")
}

func TestTextQuotesOnlyWhatIsAmbiguous(t *testing.T) {
	cases := map[string]string{
		"plain":       "plain",
		"two words":   "two words",
		"héllo ☃":     "héllo ☃",
		"":            `""`,
		" lead":       `" lead"`,
		"trail ":      `"trail "`,
		"tab\there":   `"tab\there"`,
		"new\nline":   `"new\nline"`,
		`"quoted"`:    `"\"quoted\""`,
		"\xff\x00bin": `"\xff\x00bin"`,
		"nbsp\u00a0":  `"nbsp\u00a0"`,
	}
	for in, want := range cases {
		assert.Equal(t, want, text(in), "text(%q)", in)
	}
}

func TestCellCutsLongValues(t *testing.T) {
	long := strings.Repeat("é", 100)
	got := cell(state.BytesValue([]byte(long)), false)
	assert.Equal(t, strings.Repeat("é", 60)+"… (200 bytes)", got)
	assert.Equal(t, long, cell(state.BytesValue([]byte(long)), true))
	assert.Equal(t, "-42", cell(state.IntValue(-42), false))
}

// TestCellCutsQuotedValuesBetweenEscapes: a long value shown quoted is
// cut after the escape of a whole character, never inside one, so the part
// shown, closed with a quote, unquotes to the start of the value. The
// second value is the 79 bytes of "a\n" repeated that were shown ending in
// a lone backslash.
func TestCellCutsQuotedValuesBetweenEscapes(t *testing.T) {
	newlines := strings.Repeat("a\n", 39) + "a"
	assert.Equal(t, `"`+strings.Repeat(`a\n`, 19)+`a… (79 bytes)`, cell(state.BytesValue([]byte(newlines)), false))

	for _, v := range []string{
		newlines,
		strings.Repeat("\n", 70),
		strings.Repeat("x\xff", 40),
		strings.Repeat("\u00a0", 40),
		strings.Repeat("ab\U0001f600\U000e0001\x00", 12),
		strings.Repeat("é\t", 40),
		`"` + strings.Repeat("q", 70),
	} {
		got := cell(state.BytesValue([]byte(v)), false)
		shown, size, ok := strings.Cut(got, "… ")
		require.True(t, ok, "%q is cut: %s", v, got)
		assert.Equal(t, fmt.Sprintf("(%d bytes)", len(v)), size)
		assert.LessOrEqual(t, utf8.RuneCountInString(shown), maxCellRunes-4, "%q", v)
		start, err := strconv.Unquote(shown + `"`)
		require.NoError(t, err, "%q shows %s, not a start of its quoted text", v, shown)
		assert.True(t, strings.HasPrefix(v, start), "%q shows %s", v, shown)
		assert.Greater(t, utf8.RuneCountInString(shown), maxCellRunes-4-10, "%q: cut no shorter than needed: %s", v, shown)
	}
}

func TestDurPrintsLikeGo(t *testing.T) {
	cases := map[time.Duration]string{
		29412 * time.Millisecond:        "29.4s",
		90 * time.Second:                "1m30s",
		250 * time.Millisecond:          "250ms",
		38240 * time.Microsecond:        "38.2ms",
		12345 * time.Nanosecond:         "12µs",
		-3 * time.Second:                "-3s",
		time.Hour + 50*time.Millisecond: "1h0m0.1s",
	}
	for d, want := range cases {
		assert.Equal(t, want, dur(d), "dur(%v)", d)
	}
}

func TestSize(t *testing.T) {
	assert.Equal(t, "512 B", size(512))
	assert.Equal(t, "1023 B", size(1023))
	assert.Equal(t, "1.0 KiB", size(1024))
	assert.Equal(t, "1.0 MiB", size(1024*1024))
	assert.Equal(t, "24.0 KiB", size(24576))
	assert.Equal(t, "3.5 MiB", size(3*1024*1024+512*1024))
}

func TestParseArgsTakesFlagsAnywhere(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	n := fs.Bool("int", false, "")
	var ttl ttlFlag
	fs.Var(&ttl, "ttl", "")

	p, err := parseArgs(fs, []string{"file", "--int", "key", "-5", "-ttl=30s", "--", "--int", "x"})
	require.NoError(t, err)
	assert.Equal(t, []string{"file", "key", "-5"}, p.pos, "a negative number is an argument")
	assert.Equal(t, []string{"--int", "x"}, p.rest, "after -- nothing is a flag")
	assert.True(t, *n)
	assert.Equal(t, 30*time.Second, ttl.d)
	assert.True(t, ttl.set)

	_, err = parseArgs(fs, []string{"file", "--nope"})
	assert.EqualError(t, err, `unknown flag "--nope"; to pass it as a value, put -- before the arguments`)
	_, err = parseArgs(fs, []string{"file", "-5 apples"})
	assert.EqualError(t, err, `unknown flag "-5 apples"; to pass it as a value, put -- before the arguments`,
		"the argument as given")
	_, err = parseArgs(fs, []string{"file", "--int=maybe"})
	assert.EqualError(t, err, `invalid value "maybe" for --int: not true or false`)
	_, err = parseArgs(fs, []string{"file", "--ttl"})
	assert.EqualError(t, err, "flag --ttl needs a value")
	_, err = parseArgs(fs, []string{"--help"})
	assert.ErrorIs(t, err, errHelp)
	for _, h := range []string{"-h", "-help", "--help"} {
		_, err = parseArgs(fs, []string{"file", "key", h})
		var e *helpWithArgsError
		require.ErrorAs(t, err, &e, "%s among arguments is no request for help alone", h)
		assert.Equal(t, h, e.arg)
	}
	p, err = parseArgs(fs, []string{"file", "key", "--", "-h"})
	require.NoError(t, err)
	assert.Equal(t, []string{"-h"}, p.rest)
}

func TestTableWithoutRowsPrintsNothing(t *testing.T) {
	var tty bytes.Buffer
	require.NoError(t, newTable(&tty, true, "KEY", "VALUE").flush())
	assert.Empty(t, tty.String())
}

// TestHighWaterSaysWhereTheWallClockIs: info's high-water mark line says
// whether the wall clock is behind the mark, ahead of it or at it, and
// "none yet" for a file no writer has marked.
func TestHighWaterSaysWhereTheWallClockIs(t *testing.T) {
	mark := time.Date(2026, 11, 30, 1, 18, 12, 574_000_000, time.UTC)
	assert.Equal(t, "2026-11-30T01:18:12.574Z (400ms ahead of the wall clock)",
		highWater(state.Stats{HighWater: mark, Wall: mark.Add(-400 * time.Millisecond)}))
	assert.Equal(t, "2026-11-30T01:18:12.574Z (2.5s behind the wall clock)",
		highWater(state.Stats{HighWater: mark, Wall: mark.Add(2500 * time.Millisecond)}))
	assert.Equal(t, "2026-11-30T01:18:12.574Z (at the wall clock)", highWater(state.Stats{HighWater: mark, Wall: mark}))
	assert.Equal(t, "none yet", highWater(state.Stats{HighWater: time.UnixMilli(0), Wall: mark}))
}
