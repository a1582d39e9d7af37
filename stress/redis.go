package stress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/statekit/statekit/internal/backend"
	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// Redis run settings.
const (
	// redisDir is the directory of the server a Redis run starts, in
	// Config.Dir.
	redisDir = "redis"
	// goneWait bounds how long the driver waits, after a worker died, for
	// the server to drop that worker's connections.
	goneWait = 30 * time.Second
	// relaunchGap is how long a killed server stays down before it is
	// started again. A reply lost to the kill and reported within it was
	// certainly sent to the dead server, so its op is bounded by the
	// kill (boundByOutage); one reported later may have been sent to the
	// new server.
	relaunchGap = 50 * time.Millisecond
)

// outage is one SIGKILL of the server and its restart, on CLOCK_MONOTONIC:
// the kill was sent at kill, the process was seen dead at dead, the new
// server was started at relaunch (no connection to it exists before), and
// it answered PING at up.
type outage struct {
	kill, dead, relaunch, up int64
}

// redisRun is what the driver keeps of the Redis server a run attacks.
type redisRun struct {
	server   *redistest.Server // nil for a server the caller runs
	addr     string
	password string
	url      string // for the workers, without client_name
	prefix   string // every key the run writes starts with it
	names    string // every client name of the run's workers starts with it
	outages  []outage
}

// setupRedis starts the run's own server (or takes the caller's) and
// builds the workers' URL: a prefix of the run's own, and
// allow_unsafe_leases=true on a server without persistence.
func (d *driver) setupRedis() error {
	rc := d.cfg.Redis
	raw := rc.URL
	started := time.Now().UnixNano()
	prefix := fmt.Sprintf("stress:%d:%d:", d.cfg.Seed, started)
	// Another run may use the same server: its workers' connections must
	// not pass for this run's (awaitGone).
	r := &redisRun{names: fmt.Sprintf("stress-%d-%d-", d.cfg.Seed, started)}
	if raw == "" {
		dir := filepath.Join(d.cfg.Dir, redisDir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("stress: %w", err)
		}
		var opts []redistest.Option
		if rc.NoPersistence {
			opts = append(opts, redistest.WithoutPersistence())
		}
		s, err := redistest.Launch(dir, opts...)
		if err != nil {
			return fmt.Errorf("stress: %w", err)
		}
		r.server = s
		raw, prefix, r.names = s.URL(""), "stress:", "stress-"
	}
	if err := checkRedisURL(raw); err != nil {
		return err
	}
	u, _ := url.Parse(raw)
	q := u.Query()
	r.prefix = q.Get("prefix") + prefix
	q.Set("prefix", r.prefix)
	if rc.NoPersistence {
		q.Set("allow_unsafe_leases", "true")
	}
	u.RawQuery = q.Encode()
	r.url, r.addr = u.String(), u.Host
	if u.User != nil {
		r.password, _ = u.User.Password()
		if r.password == "" {
			r.password = u.User.Username()
		}
	}
	d.redis = r
	return nil
}

// checkRedisURL returns ErrConfig for a URL that is no redis:// or
// rediss:// URL.
// Its errors name the URL without its password, as redisstate's do.
func checkRedisURL(raw string) error {
	shown := backend.RedactURL(raw)
	if backend.UnescapedUserInfo(raw) {
		return fmt.Errorf("%w: Redis.URL %s: the user name or password holds a character a URL must percent-encode ('/' as %%2F, '?' as %%3F, '#' as %%23)", ErrConfig, shown)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL, password and all
		}
		return fmt.Errorf("%w: Redis.URL %s: %v", ErrConfig, shown, err)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fmt.Errorf("%w: Redis.URL %s: want redis:// or rediss://, not %q", ErrConfig, shown, u.Scheme)
	}
	return nil
}

// ErrNoServerTime is returned by Run for a Redis run when the redis
// backend does not report the server time its verbs ran at
// (hooks.NoteNow): without it no answer that depends on time can be
// checked.
var ErrNoServerTime = errors.New("stress: the redis backend does not report the server time of its verbs (hooks.NoteNow)")

// probeRedis opens url as a worker will, and reads a key to see that the
// backend is linked in, the server answers, and the time of a verb is
// reported; then takes a lease and releases it, to see that Lease accepts
// the server (a server of the caller's may have persistence off: every
// grant of the run would fail, and the check of their unknown outcomes
// take many minutes).
func probeRedis(raw string) error {
	db, err := state.Open(raw)
	if err != nil {
		return fmt.Errorf("stress: %w", err)
	}
	defer db.Close()
	var now int64
	ctx := hooks.WithNow(context.Background(), func(ms int64) { now = ms })
	if _, err := db.Get(ctx, "probe"); err != nil && !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("stress: %w", err)
	}
	if now == 0 {
		return ErrNoServerTime
	}
	l, err := db.Lease(context.Background(), "probe", "stress", time.Second)
	if err != nil {
		return fmt.Errorf("stress: the server refuses leases: %w", err)
	}
	if err := db.Release(context.Background(), l); err != nil {
		return fmt.Errorf("stress: %w", err)
	}
	return nil
}

// workerURL is the URL worker index opens: the run's, with a client name
// that lets the driver find its connections on the server.
func (d *driver) workerURL(index int) string {
	u, _ := url.Parse(d.redis.url) // parsed in setupRedis
	q := u.Query()
	q.Set("client_name", d.redis.clientName(index))
	u.RawQuery = q.Encode()
	return u.String()
}

// clientName is the Redis client name of worker index's connections.
func (r *redisRun) clientName(index int) string { return fmt.Sprintf("%s%04d", r.names, index+1) }

// closeRedis kills the run's own server, if it started one.
func (d *driver) closeRedis() {
	if d.redis != nil && d.redis.server != nil {
		d.redis.server.Close()
	}
}

// killServer SIGKILLs the run's server, waits until it is dead, and
// restarts it on the same port and directory.
func (d *driver) killServer() error {
	s := d.redis.server
	o := outage{kill: monotonicNanos()}
	s.Kill()
	o.dead = monotonicNanos()
	time.Sleep(relaunchGap)
	o.relaunch = monotonicNanos()
	if err := s.Relaunch(); err != nil {
		return fmt.Errorf("stress: %w", err)
	}
	o.up = monotonicNanos()
	d.redis.outages = append(d.redis.outages, o)
	d.report.ServerKills++
	fmt.Fprintf(d.cfg.Log, "stress: killed the redis server and restarted it in %v\n",
		time.Duration(o.up-o.kill).Round(time.Millisecond))
	return nil
}

// serverKillAfter returns when the next server kill is due, or the zero
// Time when there are none.
func (d *driver) serverKillAfter() time.Time {
	if d.redis == nil || d.redis.server == nil || d.cfg.Redis.KillEvery < 0 {
		return time.Time{}
	}
	return time.Now().Add(time.Duration(d.rng.ExpFloat64() * float64(d.cfg.Redis.KillEvery)))
}

// awaitGone waits until the server holds no connection of p, which is
// dead, and moves p's end there: a command p sent just before it died
// may still sit in the server's input buffer, and runs before the server
// notices the connection closed. A server that cannot be asked (it is
// down: nothing of p's runs any more) ends the wait too.
func (d *driver) awaitGone(p *proc) {
	mark := " name=" + d.redis.clientName(p.index) + " "
	deadline := time.Now().Add(goneWait)
	for {
		list, err := redistest.CommandText(d.redis.addr, d.redis.password, "CLIENT", "LIST")
		if err != nil || !strings.Contains(" "+strings.ReplaceAll(list, "\n", " \n ")+" ", mark) {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(d.cfg.Log, "stress: the server still holds a connection of %s %v after it died\n", p.name(), goneWait)
			break
		}
		time.Sleep(time.Millisecond)
	}
	p.endNanos = monotonicNanos()
}

// boundByOutage returns the time by which an unknown op called at call
// had certainly ended, when it was last heard of (its error returned, or
// its process died) at heard, and its process was seen gone at end. Its
// command was sent at some time between call and heard, to the server
// running then, and runs before that server dies or never: a restarted
// server has none of the old connections. So the bound is the death of the
// last server that could have taken it, the one running before the first
// relaunch after heard, or end if earlier. The command need not have gone
// to the server running at call: go-redis dials again while a server
// restarts, and a process may be descheduled across a whole restart.
func (r *redisRun) boundByOutage(heard, end int64) int64 {
	for _, o := range r.outages {
		if o.relaunch >= heard {
			return min(o.dead, end)
		}
	}
	return end
}

// relaunchedWithin reports whether a server was relaunched at or after
// call and before heard: an unknown op called at call and last heard of at
// heard may then have reached the new server, so boundByOutage bounds it
// by a later server's death, or its process's end, instead of the death of
// the server running at its call (Report.LooseBound counts them).
func (r *redisRun) relaunchedWithin(call, heard int64) bool {
	for _, o := range r.outages {
		if o.relaunch >= call && o.relaunch < heard {
			return true
		}
	}
	return false
}

// duringOutage reports whether [call, ret] meets a time the server was
// being killed or was down.
func (r *redisRun) duringOutage(call, ret int64) bool {
	for _, o := range r.outages {
		if call <= o.up && ret >= o.kill {
			return true
		}
	}
	return false
}

// checkOutage reports a refused or uncertain call that met no outage of
// the server: nothing explains it.
func (d *driver) checkOutage(n note) {
	if d.redis.duringOutage(n.Call, n.Return) {
		return
	}
	what := "was refused"
	if n.Kind == noteUncertain {
		what = "lost its reply"
	}
	d.report.violate(KindEngineError, "c%d #%d %s %s while the server was up: %s", n.Client, n.Seq, n.Op, what, n.Err)
}

// checkRedisClocks holds the server's clock to what the model needs: an op
// that began after another returned ran at a server time at least as
// late, restarts included (each op is a process of its own for
// checks.ClockNeverBack).
func (d *driver) checkRedisClocks(history []linearizability.Op) {
	var procs []checks.Process
	for _, op := range history {
		if op.Event != linearizability.Verb || op.Unknown || op.Input.NowMillis == 0 {
			continue
		}
		procs = append(procs, checks.Process{Name: fmt.Sprintf("c%d #%d", op.Client, op.Seq), Start: op.Call,
			Ops: []linearizability.Op{op}})
	}
	d.report.violations(checks.ClockNeverBack(procs))
}

// checkStore opens the store the run attacked as a new client would, runs
// DB.Check on it and reads the counters.
func (d *driver) checkStore(ctx context.Context, counters []string) map[string]int64 {
	r := d.report
	db, err := state.Open(d.redis.url)
	if err != nil {
		r.violate(KindIntegrity, "reopen after the run: %v", err)
		return nil
	}
	defer db.Close()
	findings, err := db.Check(ctx)
	if err != nil {
		r.violate(KindIntegrity, "%v", err)
	}
	for _, f := range findings {
		r.violate(KindIntegrity, "%s", f)
	}
	return readCounters(ctx, r, db, counters)
}

// readCounters reads the final value of each counter key.
func readCounters(ctx context.Context, r *Report, db *state.DB, counters []string) map[string]int64 {
	finals := map[string]int64{}
	for _, k := range counters {
		v, err := db.Get(ctx, k)
		switch {
		case errors.Is(err, state.ErrNotFound):
			finals[k] = 0
		case err != nil:
			r.violate(KindIntegrity, "read counter %q: %v", k, err)
		default:
			n, ok := v.Int()
			if !ok {
				r.violate(KindCounter, "counter %q holds bytes %q", k, v.Bytes())
				continue
			}
			finals[k] = n
		}
	}
	return finals
}

// On Redis the time an op ran at comes with its answer, so an op whose
// answer was lost is journalled at an estimate of the server's time at its
// call, and ran, if at all, at some later server time. Its client's end is
// no bound on that: a call that timed out on a slow server stays in the
// server's input buffer and runs later (seen: 133 ms after the client gave
// up behind a slow fsync, and 223 ms after its estimate on a machine
// running three stress runs on two cores). What bounds it is a call sent
// after the client gave up: its bytes reached the server after the lost
// call's did, and the server reads every client that has input in each
// turn of its event loop, so by the time it ran the later call it had run
// the lost one, earlier in that turn or a turn before, or later in the same
// turn, turnSlackMillis at most. estimateSlackMillis widens the window
// before the estimate (the estimate is read just before the call is sent).
const (
	estimateSlackMillis = 2
	turnSlackMillis     = 100
)

// widenUnknownTimes returns history with each op whose answer was lost,
// and which may write, given the window of server times it may have run at
// (linearizability.Op.NowLatest), each of which the check lets it take
// effect at: from its estimate less estimateSlackMillis to the server time
// of the first call, of any client, made after its client gave up (its
// client's next call, or the time its process was seen dead), plus
// turnSlackMillis. With no such call (the run ended first), the window
// ends turnSlackMillis after the latest server time of the run. history is
// in call order; it is not changed.
func widenUnknownTimes(history []linearizability.Op) []linearizability.Op {
	out := slices.Clone(history)
	// gaveUp[i]: by when op i's client had given up on it.
	gaveUp := make([]int64, len(out))
	last := map[int]int{} // client -> index of its latest op so far
	for i, op := range out {
		gaveUp[i] = math.MaxInt64
		if op.Event != linearizability.Verb {
			continue
		}
		if op.Unknown && op.Return > op.Call {
			gaveUp[i] = op.Return // its process was seen dead then
		}
		if j, ok := last[op.Client]; ok {
			gaveUp[j] = min(gaveUp[j], op.Call)
		}
		last[op.Client] = i
	}
	// known: the calls whose server time is known, in call order, and
	// firstAfter[k] the least server time of known[k:].
	var known []linearizability.Op
	var latest int64
	for _, op := range out {
		if op.Event == linearizability.Verb && !op.Unknown && op.Input.NowMillis != 0 {
			known = append(known, op)
			latest = max(latest, op.Input.NowMillis)
		}
	}
	firstAfter := make([]int64, len(known)+1)
	firstAfter[len(known)] = latest
	for k := len(known) - 1; k >= 0; k-- {
		firstAfter[k] = known[k].Input.NowMillis
		if k+1 < len(known) {
			firstAfter[k] = min(firstAfter[k], firstAfter[k+1])
		}
	}
	for i := range out {
		op := &out[i]
		if op.Event != linearizability.Verb || !op.Unknown || op.Input.NowMillis == 0 || !writes(op.Input) {
			continue
		}
		est := op.Input.NowMillis
		k := len(known)
		if gaveUp[i] != math.MaxInt64 {
			k, _ = slices.BinarySearchFunc(known, gaveUp[i], func(c linearizability.Op, t int64) int {
				return cmp.Compare(c.Call, t) // the first call from t on
			})
		}
		op.Input.NowMillis = est - estimateSlackMillis
		op.NowLatest = max(firstAfter[k], est) + turnSlackMillis
	}
	return out
}

// writes reports whether in may change the store (an unknown read changes
// nothing, whatever its time).
func writes(in model.Input) bool {
	switch in.Kind {
	case model.Get, model.TTL:
		return false
	case model.Update:
		return slices.ContainsFunc(in.Ops, writes)
	}
	return true
}
