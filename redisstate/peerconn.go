package redisstate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// A connection the server closed while it sat unused (a server killed and
// restarted) must not carry a command: the command would fail with EOF
// after it was written, and a write whose reply is lost may or may not have
// been applied (ErrOutcomeUnknown). go-redis looks at an idle connection
// before it hands it out, but not on every path: a connection put back
// while another caller waits for a new one is handed to that caller as it
// is. So each connection looks at its socket itself before it writes after
// a pause: a server that has closed it has left an end of file or a reset
// there, and the command is not written at all (errClosedBeforeSend: the
// verb is ErrUnavailable, nothing applied). It is not sent again: a verb
// runs on the connection it was given or not at all, so it never runs on a
// restarted server long after it was called.
// TLS connections are left as go-redis makes them: their sockets hold
// records that are not replies.

// errClosedBeforeSend is a command not written because the server had
// closed its connection: nothing of it reached the server.
var errClosedBeforeSend = errors.New("the server had closed the connection before the command was written, so nothing was sent")

// peerCheckAfter is how long a connection may sit unused before its next
// write looks at its socket first. Below it the connection carried a
// reply a moment ago; the look costs a system call.
const peerCheckAfter = time.Millisecond

// monoStart anchors the connections' monotonic clock.
var monoStart = time.Now()

// checkingDialer wraps dial so that the plain TCP and Unix connections it
// makes look at their sockets before a write after a pause.
func checkingDialer(dial func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if _, ok := c.(*tls.Conn); ok {
			return c, nil
		}
		sc, ok := c.(syscall.Conn)
		if !ok {
			return c, nil
		}
		pc := &peerCheckedConn{Conn: c, sc: sc}
		pc.used()
		return pc, nil
	}
}

// peerCheckedConn is a connection that looks at its socket before a write
// after a pause (peerClosed).
type peerCheckedConn struct {
	net.Conn
	sc   syscall.Conn
	last atomic.Int64 // monotonic nanoseconds of the last read or write
}

// SyscallConn gives go-redis's own idle check the socket.
func (c *peerCheckedConn) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }

func (c *peerCheckedConn) used() { c.last.Store(int64(time.Since(monoStart))) }

// Read reads from the connection.
func (c *peerCheckedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.used()
	return n, err
}

// Write writes b, unless the connection sat unused and the server has
// closed it since: then it writes nothing and returns errClosedBeforeSend.
func (c *peerCheckedConn) Write(b []byte) (int, error) {
	if time.Duration(int64(time.Since(monoStart))-c.last.Load()) >= peerCheckAfter {
		if cause := peerClosed(c.sc); cause != nil {
			return 0, fmt.Errorf("%w (%v)", errClosedBeforeSend, cause)
		}
	}
	n, err := c.Conn.Write(b)
	c.used()
	return n, err
}
