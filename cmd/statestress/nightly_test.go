package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/stress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nightlyFile is the workflow whose stress job runs statestress each night.
const nightlyFile = "../../.github/workflows/nightly.yml"

// TestNightlyStressRunsAreSound: every statestress command of the nightly
// workflow parses (a flag misspelled there would fail every night with exit
// 2, unseen until then), and the job runs what its comments and the README
// say: the default options on a file, more processes and goroutines killed
// more often, a redis-server killed too, and both planted-bug controls
// expecting a duplicate token.
func TestNightlyStressRunsAreSound(t *testing.T) {
	b, err := os.ReadFile(nightlyFile)
	require.NoError(t, err)
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	seed := strings.NewReplacer(`"${{ steps.build.outputs.seed }}"`, "20428")
	var plans []*plan
	for _, line := range strings.Split(text, "\n") {
		_, cmd, ok := strings.Cut(line, "./statestress ")
		if !ok {
			continue
		}
		cmd, _, _ = strings.Cut(cmd, "2>&1")
		args := strings.Fields(seed.Replace(cmd))
		for _, a := range args {
			require.NotContains(t, a, "$", "%s: a shell value the test does not know: %s", nightlyFile, line)
		}
		p, code := parse(args, io.Discard)
		require.NotNil(t, p, "%s: statestress %s: exit %d", nightlyFile, strings.Join(args, " "), code)
		assert.Equal(t, "out", p.dir, "%v: its files go where the artifact keeps them", args)
		plans = append(plans, p)
	}
	require.Len(t, plans, 5, "%s: the stress job's runs", nightlyFile)
	var file, many, redis, planted, unpersisted int
	for _, p := range plans {
		c := p.cfg
		switch {
		case p.expect != "":
			assert.Equal(t, stress.KindDuplicateToken, p.expect)
			switch {
			case c.Bugs.Has(bugs.LeaseTwoStatements):
				planted++
			case c.Redis != nil && c.Redis.NoPersistence:
				unpersisted++
			}
		case c.Redis != nil:
			assert.Equal(t, stress.DefaultProcesses, c.Processes, "Redis on the defaults")
			redis++
		case c.Processes == stress.DefaultProcesses && c.Goroutines == stress.DefaultGoroutines && c.KillEvery == stress.DefaultKillEvery:
			assert.Equal(t, stress.DefaultReaders, c.Readers, "the default options, a reader included")
			file++
		default:
			assert.Greater(t, c.Processes, stress.DefaultProcesses)
			assert.Greater(t, c.Goroutines, stress.DefaultGoroutines)
			assert.Less(t, c.KillEvery, stress.DefaultKillEvery)
			many++
		}
	}
	assert.Equal(t, []int{1, 1, 1, 1, 1}, []int{file, many, redis, planted, unpersisted},
		"runs: the default file, many, Redis, the planted bug, Redis without persistence")
}
