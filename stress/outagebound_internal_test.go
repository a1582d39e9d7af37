package stress

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBoundByOutageIsTheLastServerTheCommandCouldReach: an op whose reply
// was lost ran on the server its command reached, before that server
// died, or never. Its command left between its call and the time its
// error returned, so the bound is the death of the server running before
// the first relaunch after that time, not of the server running at its
// call: a call made before a kill can dial the restarted server (go-redis
// dials again while it is down) and lose its reply there. Bounding such an
// op by the first kill after its call made the check report a
// lost-answer increment applied after a later delete as a violation.
func TestBoundByOutageIsTheLastServerTheCommandCouldReach(t *testing.T) {
	r := &redisRun{outages: []outage{
		{kill: 100, dead: 110, relaunch: 160, up: 170},
		{kill: 300, dead: 310, relaunch: 360, up: 370},
	}}
	const end = 1000
	cases := []struct {
		name        string
		heard, want int64
	}{
		{"lost before the first kill: the first server", 50, 110},
		{"lost at the first kill, heard of before its relaunch", 120, 110},
		{"heard of as the first relaunch began", 160, 110},
		{"heard of after the first relaunch: maybe the second server", 161, 310},
		{"heard of while the second server was down", 330, 310},
		{"heard of after the last relaunch: its process's end", 400, end},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, r.boundByOutage(c.heard, end), c.name)
	}
	assert.Equal(t, int64(105), r.boundByOutage(50, 105), "a process gone before the kill bounds it")
	assert.Equal(t, int64(end), (&redisRun{}).boundByOutage(50, end), "no outage: the process's end")
}

// A refused call or a lost answer is explained by an outage only when the
// call's span meets it, from the kill's sending to the new server's first
// answer, both ends included; one a moment outside is reported. A
// relaunch counts as within an unknown op's span from its call on, and
// not at the moment its error was heard.
func TestOutageWindowsEndWhereTheOutageDoes(t *testing.T) {
	r := &redisRun{outages: []outage{{kill: 100, dead: 110, relaunch: 160, up: 170}}}
	for _, c := range []struct {
		call, ret int64
		want      bool
	}{
		{50, 99, false}, {50, 100, true}, {120, 130, true}, {170, 200, true}, {171, 200, false}, {50, 300, true},
	} {
		assert.Equal(t, c.want, r.duringOutage(c.call, c.ret), "[%d, %d]", c.call, c.ret)
	}
	assert.True(t, r.relaunchedWithin(160, 200), "relaunched at its call")
	assert.False(t, r.relaunchedWithin(100, 160), "relaunched as its error was heard")
	assert.False(t, r.relaunchedWithin(161, 200), "relaunched before its call")
}
