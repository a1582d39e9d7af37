package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// fullWriter fails every write, as /dev/full does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

func TestUnwrittenReportIsNotASuccess(t *testing.T) {
	var errOut bytes.Buffer
	code := run([]string{"-seed", "3", "-ops", "50"}, fullWriter{}, &errOut, nil)
	assert.Equal(t, exitUsage, code, "a passing run whose report was lost")
	assert.Contains(t, errOut.String(), "statesim: the report could not be written: no space left on device")

	errOut.Reset()
	code = run([]string{"-seeds", "2", "-ops", "50", "-parallel", "1"}, fullWriter{}, &errOut, nil)
	assert.Equal(t, exitUsage, code, "passing seeds whose summary was lost")
	assert.Contains(t, errOut.String(), "no space left on device")

	errOut.Reset()
	code = run([]string{"-seed", "1", "-ops", "300", "-bug", "read-ignores-deadline", "-html", t.TempDir()}, fullWriter{}, &errOut, nil)
	assert.Equal(t, exitViolation, code, "a violation stays a violation")
	assert.Contains(t, errOut.String(), "no space left on device")
	assert.Contains(t, errOut.String(), "replay: statesim -seed 1 -ops 300 -bug read-ignores-deadline -v")
}
