package stress

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRunRefusesToRunInsideAWorker(t *testing.T) {
	t.Setenv(workerEnv, "{}")
	_, err := Run(t.Context(), Config{Dir: t.TempDir()})
	assert.ErrorIs(t, err, ErrConfig, "a binary that forgot WorkerMain must not start workers of workers")
}
