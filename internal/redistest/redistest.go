// Package redistest starts real redis-server processes for tests: one
// server on a free port of 127.0.0.1 with its own directory, or a small
// cluster of masters. Every server is killed when the test ends and, on
// Linux, when the process that started it dies, even of SIGKILL.
//
// A test that calls Start or StartCluster on a machine without
// /usr/bin/redis-server (or redis-server on PATH) is skipped, in one line.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/childproc"
)

// startWait bounds how long a server may take to answer PING after it was
// started. It is a cap for a loaded machine, not a speed target.
const startWait = 30 * time.Second

// Server is one redis-server process started for a test.
type Server struct {
	t        testing.TB
	bin      string
	dir      string
	port     int
	args     []string
	password string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
	log  *os.File
}

// Option configures Start.
type Option func(*options)

type options struct {
	persistence bool
	password    string
	extra       []string
}

// WithoutPersistence starts the server with appendonly no: acknowledged
// writes may be lost on a crash, and statekit refuses leases on it unless
// the URL has allow_unsafe_leases=true.
func WithoutPersistence() Option { return func(o *options) { o.persistence = false } }

// WithPassword starts the server with --requirepass password. URL then
// includes it as redis-cli takes it: redis://:password@host:port.
func WithPassword(password string) Option { return func(o *options) { o.password = password } }

// WithArgs adds command-line arguments to redis-server (as "--maxmemory",
// "1mb").
func WithArgs(args ...string) Option {
	return func(o *options) { o.extra = append(o.extra, args...) }
}

// Binary returns the path of redis-server, or "" when it is not installed.
func Binary() string {
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server"
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	return ""
}

// skipWithout skips t when redis-server is not installed.
func skipWithout(t testing.TB) string {
	t.Helper()
	bin := Binary()
	if bin == "" {
		t.Skipf("redis-server not installed: skipping %s; .ci/run installs it", t.Name())
	}
	return bin
}

// Start starts redis-server on 127.0.0.1 and a free port, in a directory
// of its own (t.TempDir), with RDB snapshots off and, unless
// WithoutPersistence, appendonly yes and appendfsync always. It returns
// once the server answers PING. The server is killed when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin := skipWithout(t)
	o := options{persistence: true}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), password: o.password}
	s.args = serverArgs(s.dir, o)
	t.Cleanup(s.Kill)
	var err error
	for range 5 {
		s.port, err = FreePort()
		if err != nil {
			continue
		}
		if err = s.start(); err == nil {
			return s
		}
	}
	t.Fatalf("redistest: redis-server would not start: %v", err)
	return nil
}

// serverArgs returns redis-server's arguments, but the port, for a server
// in dir with options o.
func serverArgs(dir string, o options) []string {
	args := []string{"--save", "", "--dir", dir, "--bind", "127.0.0.1", "--protected-mode", "no", "--daemonize", "no"}
	if o.persistence {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if o.password != "" {
		args = append(args, "--requirepass", o.password)
	}
	return append(args, o.extra...)
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

// start runs the server on s.port and waits for PING.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	logf, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	args := append([]string{"--port", strconv.Itoa(s.port)}, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	// A group of its own: a kill reaches the children the server forks
	// (an AOF rewrite), which would otherwise go on writing in its dir.
	// The group keeps it from the kill a parent's group gets, so on Linux
	// childproc gives it a parent-death signal: a parent killed before it
	// could Kill the server (a CI timeout) takes it along.
	ownGroup(cmd)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := childproc.Start(cmd); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	s.cmd, s.done, s.log = cmd, done, logf
	if err := waitPing(s.Addr(), s.password, done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		s.cmd = nil
		return fmt.Errorf("%w; log: %s", err, tail(filepath.Join(s.dir, "redis.log")))
	}
	return nil
}

// waitPing waits until the server at addr answers PING with PONG (or
// NOAUTH, which says it is up), or exited is closed, or startWait passed.
func waitPing(addr, password string, exited <-chan struct{}) error {
	deadline := time.Now().Add(startWait)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("redis-server exited before it answered PING")
		default:
		}
		if last = Ping(addr, password); last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server at %s did not answer PING within %v: %v", addr, startWait, last)
}

// Ping sends PING (after AUTH when password is set) to addr over a fresh
// connection and returns nil for PONG.
func Ping(addr, password string) error {
	_, err := Command(addr, password, "PING")
	return err
}

// Command sends one command to addr over a fresh connection (after AUTH
// when password is set) and returns the first line of the reply. An error
// reply is returned as an error.
func Command(addr, password string, args ...string) (string, error) {
	return roundTrip(addr, password, args, func(line string, _ *bufio.Reader) (string, error) { return line, nil })
}

// roundTrip sends args to addr over a fresh connection, after AUTH when
// password is set, and returns what reply makes of the first line of each
// reply and the reader for the rest of it. An error reply is an error.
func roundTrip(addr, password string, args []string, reply func(line string, r *bufio.Reader) (string, error)) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	send := func(args ...string) (string, error) {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := c.Write([]byte(b.String())); err != nil {
			return "", err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "-") {
			return "", errors.New(line[1:])
		}
		return reply(line, r)
	}
	if password != "" {
		if _, err := send("AUTH", password); err != nil {
			return "", err
		}
	}
	return send(args...)
}

// tail returns the last lines of a log file, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory (its append-only file lives
// there).
func (s *Server) Dir() string { return s.dir }

// URL returns a redis:// URL of the server for statekit, with the password
// if the server has one and prefix= set to prefix.
func (s *Server) URL(prefix string) string {
	u := url.URL{Scheme: "redis", Host: s.Addr(), Path: "/0"}
	if s.password != "" {
		u.User = url.UserPassword("", s.password)
	}
	u.RawQuery = url.Values{"prefix": {prefix}}.Encode()
	return u.String()
}

// Command sends one command to the server, as Command does.
func (s *Server) Command(args ...string) (string, error) {
	return Command(s.Addr(), s.password, args...)
}

// Kill kills the server with SIGKILL, as a crash would, and waits for it
// to exit. It does nothing when the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGKILL)
}

// Stop asks the server to exit (SIGTERM: it writes what it has and exits)
// and waits for it, killing it after startWait.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGTERM)
}

func (s *Server) stopLocked(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	pgid := s.cmd.Process.Pid
	ask(s.cmd.Process, sig)
	select {
	case <-s.done:
	case <-time.After(startWait):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
	// What the server forked and left behind (an AOF rewrite in progress
	// when it was killed) goes too, before anyone removes its directory.
	killGroup(pgid)
}

// Pause stops the server with SIGSTOP: it keeps its connections and
// answers nothing, as a hung host would, until Resume.
func (s *Server) Pause() { s.apply(pause) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.apply(resume) }

func (s *Server) apply(f func(*os.Process)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		f(s.cmd.Process)
	}
}

// PID returns the server's process id, or 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Restart starts the server again, after Kill or Stop, on the same port and
// directory (so it reloads its append-only file), and waits for PING.
// A running server is killed first.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	var err error
	deadline := time.Now().Add(startWait)
	for {
		if err = s.start(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the port may linger for a moment
	}
	s.t.Fatalf("redistest: restart on %s: %v", s.Addr(), err)
}

// RestartWith is Restart with the server's options replaced by opts (as
// Start takes them; its password stays): a server an operator restarted
// with another configuration, such as appendonly no, which loads no
// append-only file.
func (s *Server) RestartWith(opts ...Option) {
	s.t.Helper()
	o := options{persistence: true, password: s.password}
	for _, opt := range opts {
		opt(&o)
	}
	s.Kill()
	s.mu.Lock()
	s.args = serverArgs(s.dir, o)
	s.mu.Unlock()
	s.Restart()
}

// Cluster is a Redis Cluster of masters started for a test.
type Cluster struct {
	Servers []*Server
}

// Addrs returns the masters' host:port addresses.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		a[i] = s.Addr()
	}
	return a
}

// URL returns a redis+cluster:// URL naming every master, with prefix=.
func (c *Cluster) URL(prefix string) string {
	u := url.URL{Scheme: "redis+cluster", Host: strings.Join(c.Addrs(), ","), Path: "/"}
	u.RawQuery = url.Values{"prefix": {prefix}}.Encode()
	return u.String()
}

// StartCluster starts masters (at least 3) redis-servers with cluster mode
// on, persistence as Start's default, joins them with redis-cli --cluster
// create (no replicas), and waits until every node says cluster_state:ok.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	skipWithout(t)
	cli := "/usr/bin/redis-cli"
	if _, err := os.Stat(cli); err != nil {
		var lerr error
		if cli, lerr = exec.LookPath("redis-cli"); lerr != nil {
			t.Skipf("redis-cli not installed: skipping %s; .ci/run installs it", t.Name())
		}
	}
	if masters < 3 {
		t.Fatalf("redistest: a cluster needs at least 3 masters, not %d", masters)
	}
	c := &Cluster{}
	for range masters {
		s := Start(t, WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"))
		c.Servers = append(c.Servers, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v: %s", err, out)
	}
	deadline := time.Now().Add(startWait)
	for _, s := range c.Servers {
		for {
			info, err := clusterInfo(s.Addr())
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster node %s not ok within %v: %v %s", s.Addr(), startWait, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// clusterInfo returns CLUSTER INFO's text from addr.
func clusterInfo(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n")); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(head, "$") {
		return "", errors.New(strings.TrimSpace(head))
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		return "", err
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
