package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/internal/childproc"
	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
)

// The app scenario's load: appClients keep-alive connections, spread over
// appServers server processes, asking for the pages of appUsers users at
// random, so that most requests are allowed. A run of -app-requests
// requests that takes longer than appCap has failed.
const (
	appServers  = 2
	appClients  = 32
	appUsers    = 10_000
	appWarm     = 1000
	appCap      = 2 * time.Minute
	appMinRatio = 1.2
	appTarget   = ">= 1.2x, p99 no worse"
)

// appFlavour is one way to build the app: a limiter over a store.
type appFlavour struct {
	name    string // in the report
	limiter string // limitIncr, limitMiddleware or limitLua
	sync    string // the file's sync mode (normal, full), or redis-server's appendfsync (always, everysec)
}

// The flavours measured. The file's SyncNormal and Redis's appendfsync
// everysec keep the same promise: an answered write is in the kernel, so it
// survives the crash of any process, but not a power loss (the file syncs
// its WAL at checkpoints, Redis its append-only file once a second).
// SyncFull and appendfsync always keep the next one: synced before the
// answer, so it survives a power loss too. Both sync once for every write
// that arrived together (group commit; one fsync per event-loop turn).
var (
	appFileIncr    = appFlavour{"file: db.Incr+TTL, NORMAL (default)", limitIncr, "normal"}
	appFileFull    = appFlavour{"file: db.Incr+TTL, FULL", limitIncr, "full"}
	appFileMW      = appFlavour{"file: ratelimit.FixedWindow middleware, NORMAL", limitMiddleware, "normal"}
	appRedisSec    = appFlavour{"redis: Lua INCR+PEXPIRE, appendfsync everysec", limitLua, "everysec"}
	appRedisAlways = appFlavour{"redis: Lua INCR+PEXPIRE, appendfsync always", limitLua, "always"}
)

// appPair is one line of the report: a file flavour beside a Redis one
// (or, without redis-server, beside another file flavour).
type appPair struct {
	a, b   appFlavour
	target bool
	why    string
}

// appServer is one flavour's running app: its server processes and the
// load generator's connections to them.
type appServer struct {
	f        appFlavour
	ws       []*worker
	urls     []string
	clients  []*http.Client
	allowed  atomic.Int64 // 200s answered, over every run
	refused  atomic.Int64 // 429s answered
	redisSrv *redistest.Server
}

// runApp is the rate-limit web app: a fixed window of appLimit requests a
// minute per user, served over HTTP on loopback by two processes of one
// flavour at a time, measured from this process by appClients concurrent
// keep-alive clients, each flavour's run a count of -app-requests requests.
// Each line is a file flavour beside a Redis one, the two run in turns
// (a, b, b, a ...); then each flavour must allow exactly appLimit of a burst
// at one user, across its two processes.
func runApp(e *env) ([]Result, error) {
	pairs := []appPair{
		{appFileIncr, appRedisSec, true, "the same promise: survives a crash, not a power loss"},
		{appFileFull, appRedisAlways, true, "the same promise: synced before the answer"},
		{appFileIncr, appRedisAlways, false, "the redis scenario's server; the file promises less"},
		{appFileMW, appRedisSec, false, "package ratelimit's middleware, which also sets the RateLimit fields"},
	}
	if redistest.Binary() == "" {
		e.logf("app: redis-server is not installed; the file flavours only")
		pairs = []appPair{{appFileIncr, appFileMW, false, "redis-server not installed"}}
	}
	servers := map[appFlavour]*appServer{}
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	get := func(f appFlavour) (*appServer, error) {
		if s := servers[f]; s != nil {
			return s, nil
		}
		s, err := startApp(e, f)
		if s != nil {
			servers[f] = s
		}
		return s, err
	}
	ae := *e
	ae.bt = budget{n: int64(e.appRequests)}
	var out []Result
	for _, p := range pairs {
		a, err := get(p.a)
		if err != nil {
			return nil, err
		}
		b, err := get(p.b)
		if err != nil {
			return nil, err
		}
		e.logf("app: %s beside %s", p.a.name, p.b.name)
		warm := budget{n: int64(min(appWarm, e.appRequests))}
		sa, sb, err := interleaveWith(&ae, a.load(e, ""), b.load(e, ""), runOpts{warm: warm})
		if err != nil {
			return nil, err
		}
		out = append(out, appResult(p, sa.measure(p.a.name), sb.measure(p.b.name)))
	}
	var notes []string
	for _, f := range []appFlavour{appFileIncr, appFileFull, appFileMW, appRedisSec, appRedisAlways} {
		s := servers[f]
		if s == nil {
			continue
		}
		if err := s.exact(e); err != nil {
			return nil, err
		}
		all := s.allowed.Load() + s.refused.Load()
		notes = append(notes, fmt.Sprintf("%s: %.1f%% of %d requests refused (429)", f.name, 100*float64(s.refused.Load())/float64(all), all))
	}
	last := &out[len(out)-1]
	last.Notes = append(last.Notes,
		fmt.Sprintf("%d server processes a flavour, %d keep-alive clients, %d users, %d requests a flavour a round, %d rounds; a limit of %d a minute per user",
			appServers, appClients, appUsers, e.appRequests, e.count, appLimit),
		fmt.Sprintf("exact: a burst of %d requests at one user, from every client over both processes, allowed exactly %d on every flavour", 2*appLimit, appLimit))
	last.Notes = append(last.Notes, notes...)
	return out, nil
}

// appResult is a pair's line: requests/s against the other flavour's, the
// median over rounds, and the latencies seen by the clients.
func appResult(p appPair, a, b Measure) Result {
	r := ratioResult("app", a, b, appMinRatio)
	r.Target, r.Met = "", false
	if p.target {
		r.Target = appTarget
		r.Met = r.Ratio >= appMinRatio && a.P99Micros <= b.P99Micros
	}
	r.Extra["max_us"], r.Extra["baseline_max_us"] = a.MaxMicros, b.MaxMicros
	if b.P99Micros > 0 {
		r.Extra["p99_vs_baseline"] = a.P99Micros / b.P99Micros
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%s beside %s (%s): %.2fx requests/s (totals %.2fx); p50 %s against %s µs, p99 %s against %s, max %s against %s",
		a.Name, b.Name, p.why, r.Ratio, r.Extra["ratio_of_totals"], num(a.P50Micros), num(b.P50Micros),
		num(a.P99Micros), num(b.P99Micros), num(a.MaxMicros), num(b.MaxMicros)))
	return r
}

// startApp starts f's redis-server, if it has one, and its server
// processes, and returns once each listens.
func startApp(e *env, f appFlavour) (*appServer, error) {
	s := &appServer{f: f}
	var target string
	if f.limiter == limitLua {
		dir := filepath.Join(e.dir, "app-redis-"+f.sync)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		srv, err := redistest.Launch(dir, redistest.WithArgs("--appendfsync", f.sync))
		if err != nil {
			return nil, err
		}
		s.redisSrv, target = srv, srv.Addr()
	} else {
		target = e.path("app-" + f.limiter + "-" + f.sync + ".state")
		db, err := state.Open(target) // create the file before the race to open it
		if err != nil {
			return s, err
		}
		db.Close()
	}
	for i := range appServers {
		args := []string{childArg, "-mode", "app", "-limiter", f.limiter, "-path", target, "-sync", f.sync}
		if f.limiter == limitLua {
			args = args[:len(args)-2]
		}
		if e.appProfile != "" {
			args = append(args, "-cpuprofile", fmt.Sprintf("%s.app-%s-%s.%d", e.appProfile, f.limiter, f.sync, i+1))
		}
		cmd := exec.Command(e.exe, args...)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return s, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return s, err
		}
		if err := childproc.Start(cmd); err != nil { // on Linux it dies with statebench
			return s, fmt.Errorf("start app server: %w", err)
		}
		w := &worker{cmd: cmd, in: in, out: bufio.NewReader(out)}
		s.ws = append(s.ws, w)
		line, err := w.out.ReadString('\n')
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
		if err != nil || !ok {
			return s, fmt.Errorf("app server did not start: %q %v", line, err)
		}
		s.urls = append(s.urls, "http://"+addr+"/")
	}
	for range appClients {
		s.clients = append(s.clients, &http.Client{Timeout: appCap, Transport: &http.Transport{
			MaxIdleConnsPerHost: 1, DisableCompression: true}})
	}
	return s, nil
}

// stop ends f's processes and closes the clients' connections.
func (s *appServer) stop() {
	for _, c := range s.clients {
		c.CloseIdleConnections()
	}
	stopWorkers(s.ws)
	if s.redisSrv != nil {
		s.redisSrv.Close()
	}
}

// load returns a side of the scenario as interleaveWith runs it: b.n
// requests from appClients clients at once, client i on server i mod
// appServers, each for a random user (or all for user, when set), each
// timed from sending to the last byte of the answer.
func (s *appServer) load(e *env, user string) func(budget) (sample, error) {
	return func(b budget) (sample, error) {
		if b.n <= 0 {
			return sample{}, fmt.Errorf("app: a run is a count of requests, not %v", b)
		}
		ctx, cancel := context.WithTimeout(e.ctx, appCap)
		defer cancel()
		var left atomic.Int64
		left.Store(b.n)
		lats := make([][]time.Duration, len(s.clients))
		errs := make([]error, len(s.clients))
		var wg sync.WaitGroup
		start := time.Now()
		for i, c := range s.clients {
			wg.Go(func() {
				base := s.urls[i%len(s.urls)] + "?user="
				for left.Add(-1) >= 0 {
					u := user
					if u == "" {
						u = fmt.Sprintf("u%d", rand.IntN(appUsers))
					}
					t := time.Now()
					if errs[i] = s.ask(ctx, c, base+u); errs[i] != nil {
						left.Store(0)
						return
					}
					lats[i] = append(lats[i], time.Since(t))
				}
			})
		}
		wg.Wait()
		smp := sample{elapsed: time.Since(start)}
		for i := range lats {
			smp.ops += int64(len(lats[i]))
			smp.lat = append(smp.lat, lats[i]...)
		}
		for _, err := range errs {
			if err != nil {
				return smp, fmt.Errorf("app %s: %w", s.f.name, err)
			}
		}
		return smp, nil
	}
}

// ask makes one request and counts its answer, which must be 200 or 429.
func (s *appServer) ask(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body) // to the end, so the connection is kept
	resp.Body.Close()
	if err != nil {
		return err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		s.allowed.Add(1)
	case http.StatusTooManyRequests:
		s.refused.Add(1)
	default:
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// exact fires 2*appLimit requests at one user from every client, over both
// processes, and fails unless exactly appLimit are allowed. A burst starts
// at least a second from a minute's edge (the processes' clocks, and the
// middleware's engine time, may be a little apart), and one that may have
// straddled two minutes is tried again with another user.
func (s *appServer) exact(e *env) error {
	const margin = time.Second
	for try := range 3 {
		now := time.Now()
		switch into := now.Sub(now.Truncate(appWindow)); {
		case into < margin:
			time.Sleep(margin - into)
		case appWindow-into < 2*margin:
			time.Sleep(appWindow - into + margin)
		}
		before := time.Now().Add(-margin)
		allowed := s.allowed.Load()
		if _, err := s.load(e, fmt.Sprintf("exact-%d-%d", time.Now().UnixNano(), try))(budget{n: 2 * appLimit}); err != nil {
			return err
		}
		got := s.allowed.Load() - allowed
		s.allowed.Add(-got) // not part of the load
		s.refused.Add(-(2*appLimit - got))
		if before.Truncate(appWindow) != time.Now().Add(margin).Truncate(appWindow) {
			continue
		}
		if got != appLimit {
			return fmt.Errorf("app %s not exact: a burst of %d requests at one user, %d allowed, at a limit of %d",
				s.f.name, 2*appLimit, got, appLimit)
		}
		return nil
	}
	return fmt.Errorf("app %s: every exactness burst straddled a minute", s.f.name)
}
