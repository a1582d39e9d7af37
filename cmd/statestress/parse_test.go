package main

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/stress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFlagsMakeTheConfig: every flag, set away from its default, reaches
// the run's configuration, and so do the defaults a mode changes (-redis and
// -redis-url read no file and use longer epochs, -step-clock runs one
// goroutine, an -until flag makes -duration a cap) and the flags whose 0
// means none (-kill-every, -readers, -server-kill-every), which the
// configuration spells -1.
func TestFlagsMakeTheConfig(t *testing.T) {
	var stderr bytes.Buffer
	parsed := func(args ...string) stress.Config {
		t.Helper()
		p, code := parse(args, &stderr)
		require.NotNil(t, p, "%q: exit %d: %s", args, code, stderr.String())
		return p.cfg
	}
	bug, err := bugs.Parse(bugs.Names()[0])
	require.NoError(t, err)

	got := parsed("-procs", "3", "-readers", "2", "-goroutines", "5", "-duration", "7s", "-ops", "900",
		"-until-calls", "11", "-until-kills", "12", "-until-grants", "13", "-until-contended", "14", "-until-swept", "15",
		"-kill-every", "90ms", "-seed", "42", "-bug", bugs.Names()[0], "-check-timeout", "3s", "-check-limit", "9s",
		"-epoch", "4s", "-v")
	want := stress.Config{Processes: 3, Readers: 2, Goroutines: 5, Duration: 7 * time.Second, MaxOps: 900,
		Until:     stress.Work{Calls: 11, Kills: 12, Grants: 13, Contended: 14, Swept: 15},
		KillEvery: 90 * time.Millisecond, Seed: 42, Bugs: bugs.Set{}.With(bug), CheckTimeout: 3 * time.Second,
		CheckLimit: 9 * time.Second, EpochEvery: 4 * time.Second, Log: io.Writer(&stderr)}
	assert.Equal(t, want, got, "every flag away from its default")

	got = parsed("-seed", "1")
	assert.Equal(t, stress.Config{Processes: stress.DefaultProcesses, Readers: stress.DefaultReaders,
		Goroutines: stress.DefaultGoroutines, Duration: stress.DefaultDuration, MaxOps: defaultOps,
		KillEvery: stress.DefaultKillEvery, Seed: 1, CheckTimeout: stress.DefaultCheckTimeout,
		EpochEvery: stress.DefaultEpochEvery}, got, "the defaults")

	got = parsed("-seed", "1", "-until-calls", "5", "-kill-every", "0", "-readers", "0")
	assert.Equal(t, stress.DefaultCap, got.Duration, "an -until flag makes -duration a cap")
	assert.Equal(t, time.Duration(-1), got.KillEvery, "-kill-every 0: no kills")
	assert.Equal(t, -1, got.Readers, "-readers 0: none")
	assert.Equal(t, 9*time.Second, parsed("-seed", "1", "-until-calls", "5", "-duration", "9s").Duration, "a cap given")

	got = parsed("-seed", "1", "-step-clock")
	assert.Equal(t, 1, got.Goroutines, "-step-clock: one goroutine")
	assert.True(t, got.StepClock)
	assert.Equal(t, -1, got.Readers, "-step-clock: no readers")

	got = parsed("-seed", "1", "-redis-url", "redis://127.0.0.1:1/0")
	assert.Equal(t, &stress.Redis{URL: "redis://127.0.0.1:1/0"}, got.Redis)
	assert.Equal(t, stress.DefaultEpochEvery, got.EpochEvery, "-redis-url: the same epochs")
	assert.Equal(t, -1, got.Readers, "-redis-url: no readers")
	assert.Equal(t, 2*time.Second, parsed("-seed", "1", "-redis-url", "redis://127.0.0.1:1/0", "-epoch", "2s").EpochEvery)

	got = parsed("-seed", "1", "-redis", "-redis-no-persistence", "-server-kill-every", "0", "-until-calls", "5")
	assert.Equal(t, &stress.Redis{KillEvery: -1, NoPersistence: true}, got.Redis, "-server-kill-every 0: no server kills")
	assert.Equal(t, stress.DefaultEpochEvery, got.EpochEvery, "-redis: the same epochs")
	assert.Equal(t, -1, got.Readers, "-redis: no readers")
	got = parsed("-seed", "1", "-redis", "-server-kill-every", "2s", "-until-server-kills", "3")
	assert.Equal(t, &stress.Redis{KillEvery: 2 * time.Second}, got.Redis)
	assert.Equal(t, 3, got.Until.ServerKills)

	p, _ := parse([]string{"-seed", "1", "-expect", stress.KindDuplicateToken, "-dir", "/d", "-keep"}, &stderr)
	require.NotNil(t, p)
	assert.Equal(t, stress.KindDuplicateToken, p.expect)
	assert.Equal(t, "/d", p.dir)
	assert.True(t, p.keep)
	assert.Nil(t, p.cfg.Log, "no -v: no log")
}

// TestParseRefusesBadFlagsSayingWhy: each flag, or pair of flags, no run
// can honour is refused before any run starts, with exit 2 and the reason;
// the bounds are exact.
func TestParseRefusesBadFlagsSayingWhy(t *testing.T) {
	const procs = "want 1 to 64 -procs, a positive -duration and -epoch, and -ops of 0 or more"
	const redisOnly = "-redis-no-persistence, -server-kill-every and -until-server-kills need -redis"
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"-procs", "0"}, procs},
		{[]string{"-procs", "65"}, procs},
		{[]string{"-duration", "0s"}, procs},
		{[]string{"-ops", "-1"}, procs},
		{[]string{"-epoch", "0s"}, procs},
		{[]string{"-goroutines", "0"}, "want 1 to 64 -goroutines, and 1 with -step-clock"},
		{[]string{"-goroutines", "65"}, "want 1 to 64 -goroutines, and 1 with -step-clock"},
		{[]string{"-step-clock", "-goroutines", "2"}, "want 1 to 64 -goroutines, and 1 with -step-clock"},
		{[]string{"-readers", "-1"}, "want 0 to 64 -readers"},
		{[]string{"-readers", "65"}, "want 0 to 64 -readers"},
		{[]string{"-readers", "1", "-step-clock"}, "-readers open a file on the real clock"},
		{[]string{"-readers", "1", "-redis"}, "-readers open a file on the real clock"},
		{[]string{"-readers", "1", "-redis-url", "redis://127.0.0.1:1/0"}, "-readers open a file on the real clock"},
		{[]string{"-until-calls", "-1"}, "want -until flags of 0 or more"},
		{[]string{"-until-server-kills", "-1"}, "want -until flags of 0 or more"},
		{[]string{"-until-kills", "1", "-kill-every", "0s"}, "-until-kills needs kills"},
		{[]string{"-redis", "-redis-url", "redis://127.0.0.1:1/0"}, "-redis starts a server of its own; -redis-url names yours: not both"},
		{[]string{"-redis-no-persistence"}, redisOnly},
		{[]string{"-server-kill-every", "1s"}, redisOnly},
		{[]string{"-until-server-kills", "1"}, redisOnly},
		{[]string{"-redis-url", "redis://127.0.0.1:1/0", "-server-kill-every", "1s"}, redisOnly},
		{[]string{"-redis", "-until-server-kills", "1", "-server-kill-every", "0s"}, "-until-server-kills needs server kills"},
		{[]string{"-redis", "-step-clock"}, "-step-clock and -bug are for the file engine, not Redis"},
		{[]string{"-redis", "-bug", bugs.Names()[0]}, "-step-clock and -bug are for the file engine, not Redis"},
		{[]string{"-redis-url", "redis://127.0.0.1:1/0", "-bug", bugs.Names()[0]}, "-step-clock and -bug are for the file engine, not Redis"},
		{[]string{"-expect", "duplicate-tokens"}, `-expect "duplicate-tokens": no such kind of violation`},
		{[]string{"-bug", "no-such-bug"}, `unknown planted bug "no-such-bug"`},
	} {
		var stderr bytes.Buffer
		p, code := parse(c.args, &stderr)
		assert.Nil(t, p, "%q", c.args)
		assert.Equal(t, exitUsage, code, "%q", c.args)
		assert.Contains(t, stderr.String(), "statestress: "+c.says, "%q", c.args)
	}
	// The bounds themselves are taken.
	for _, args := range [][]string{
		{"-procs", "64"}, {"-procs", "1", "-readers", "64"}, {"-goroutines", "64"}, {"-ops", "0"},
		{"-step-clock", "-goroutines", "1"}, {"-redis", "-until-server-kills", "1"},
		{"-redis-url", "redis://127.0.0.1:1/0", "-readers", "0"},
	} {
		var stderr bytes.Buffer
		p, code := parse(args, &stderr)
		assert.NotNil(t, p, "%q: exit %d: %s", args, code, stderr.String())
	}
}
