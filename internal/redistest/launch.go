package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Launch starts redis-server as Start does, for a program that is not a
// test (the stress driver): on 127.0.0.1 and a free port, in dir (which
// must exist; its append-only file lives there), with RDB snapshots off
// and, unless WithoutPersistence, appendonly yes and appendfsync always.
// It returns once the server answers PING. The caller must Close it.
func Launch(dir string, opts ...Option) (*Server, error) {
	bin := Binary()
	if bin == "" {
		return nil, errors.New("redistest: redis-server is not installed")
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("redistest: %s is not a directory", dir)
	}
	o := options{persistence: true}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Server{bin: bin, dir: dir, password: o.password}
	s.args = serverArgs(s.dir, o)
	var err error
	for range 5 {
		s.port, err = FreePort()
		if err != nil {
			continue
		}
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redistest: redis-server would not start: %w", err)
}

// Relaunch starts a server again after Kill or Stop, on the same port and
// directory (so it reloads its append-only file, if it has one), and waits
// for PING; a running server is killed first. It is Restart for a server
// from Launch: it returns an error instead of failing a test.
func (s *Server) Relaunch() error {
	s.Kill()
	var err error
	deadline := time.Now().Add(startWait)
	for {
		if err = s.start(); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: restart on %s: %w", s.Addr(), err)
		}
		time.Sleep(50 * time.Millisecond) // the port may linger for a moment
	}
}

// Running reports whether the server process is running (it was started
// and has not been seen to exit).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Close kills the server (SIGKILL) and waits for it to exit. It does
// nothing when the server is not running.
func (s *Server) Close() { s.Kill() }

// CommandText sends one command to addr over a fresh connection (after
// AUTH when password is set) and returns its reply as text: a bulk
// string's whole content (CLIENT LIST, INFO), or the line of a simple
// reply. An error reply is returned as an error.
func CommandText(addr, password string, args ...string) (string, error) {
	return roundTrip(addr, password, args, func(line string, r *bufio.Reader) (string, error) {
		if !strings.HasPrefix(line, "$") {
			return strings.TrimPrefix(strings.TrimPrefix(line, "+"), ":"), nil
		}
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("redistest: reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	})
}

// Password returns the server's password, "" for none.
func (s *Server) Password() string { return s.password }
