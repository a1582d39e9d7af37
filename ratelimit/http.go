package ratelimit

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"time"
)

// The response fields the middleware sets, as draft-ietf-httpapi-ratelimit-headers
// (revisions 00 to 06) defines them: three fields whose values are
// non-negative integers, RateLimit-Reset in delta seconds (never a
// timestamp), on allowed and throttled responses alike. Later revisions of
// the draft fold them into RateLimit and RateLimit-Policy; these are the
// fields clients and gateways read today.
const (
	HeaderLimit      = "RateLimit-Limit"     // the quota: Decision.Limit
	HeaderRemaining  = "RateLimit-Remaining" // quota units left: Decision.Remaining
	HeaderReset      = "RateLimit-Reset"     // seconds until the quota resets
	HeaderRetryAfter = "Retry-After"         // on 429 only: seconds until a retry could pass
)

// HTTPOption configures NewMiddleware.
type HTTPOption func(*middleware)

// OnError sets what the middleware does when the limiter fails: by default
// it answers 400 Bad Request when the key function gave a key no limiter
// takes (ErrInvalidRequest: empty, too long, not UTF-8; a client's missing
// or malformed API key), and 500 Internal Server Error otherwise (the file
// is busy or broken), and in both cases does not call the next handler, so
// neither a broken limiter nor a bad key lets a request through. The default
// logs nothing and its answer does not say why: pass an fn that logs err to
// see the cause of a 500. fn may log and answer otherwise; it must write the
// response.
func OnError(fn func(w http.ResponseWriter, r *http.Request, err error)) HTTPOption {
	return func(m *middleware) { m.onError = fn }
}

// NewMiddleware returns a handler that asks l about every request, under the
// key that key returns for it (a client's API key, its address, a route and
// a user), before calling next. An allowed request goes to next with the
// RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset fields set; a
// refused one gets 429 Too Many Requests with the same fields and
// Retry-After, and never reaches next. Retry-After and RateLimit-Reset are
// whole seconds rounded up, so a client that waits that long is not early;
// on a 429 RateLimit-Reset names the same moment as Retry-After, as the
// draft asks. Every field is a non-negative integer: a Decision's negative
// Limit, Remaining or Reset (from a Limiter of the caller's own) is sent
// as 0.
//
// NewMiddleware returns ErrInvalidConfig for a nil limiter (a nil
// *FixedWindow too), key function or next handler.
func NewMiddleware(l Limiter, key func(*http.Request) string, next http.Handler, opts ...HTTPOption) (http.Handler, error) {
	switch {
	case l == nil:
		return nil, fmt.Errorf("middleware: %w: nil Limiter", ErrInvalidConfig)
	case nilPointer(l):
		return nil, fmt.Errorf("middleware: %w: nil Limiter (a nil %T)", ErrInvalidConfig, l)
	case key == nil:
		return nil, fmt.Errorf("middleware: %w: nil key function", ErrInvalidConfig)
	case next == nil:
		return nil, fmt.Errorf("middleware: %w: nil next handler", ErrInvalidConfig)
	}
	m := &middleware{l: l, key: key, next: next, onError: failed}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("middleware: %w: nil HTTPOption", ErrInvalidConfig)
		}
		o(m)
	}
	if m.onError == nil {
		return nil, fmt.Errorf("middleware: %w: nil OnError function", ErrInvalidConfig)
	}
	return m, nil
}

type middleware struct {
	l       Limiter
	key     func(*http.Request) string
	next    http.Handler
	onError func(http.ResponseWriter, *http.Request, error)
}

// failed is the default OnError.
func failed(w http.ResponseWriter, _ *http.Request, err error) {
	if errors.Is(err, ErrInvalidRequest) {
		http.Error(w, "rate limit key not usable", http.StatusBadRequest)
		return
	}
	http.Error(w, "rate limiter unavailable", http.StatusInternalServerError)
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d, err := m.l.Allow(r.Context(), m.key(r))
	if err != nil {
		m.onError(w, r, err)
		return
	}
	h := w.Header()
	// The fields are non-negative integers: a Limiter of the caller's own
	// may say less than zero, which no client can parse as the draft asks.
	h.Set(HeaderLimit, strconv.FormatInt(max(d.Limit, 0), 10))
	h.Set(HeaderRemaining, strconv.FormatInt(max(d.Remaining, 0), 10))
	if d.Allowed {
		h.Set(HeaderReset, seconds(d.Reset))
		m.next.ServeHTTP(w, r)
		return
	}
	retry := seconds(max(d.RetryAfter, time.Second))
	h.Set(HeaderReset, retry)
	h.Set(HeaderRetryAfter, retry)
	http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
}

// seconds returns d in whole seconds, rounded up: delta-seconds.
func seconds(d time.Duration) string {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return strconv.FormatInt(max(s, 0), 10)
}

// nilPointer reports whether l is a nil pointer in a non-nil interface.
func nilPointer(l Limiter) bool {
	v := reflect.ValueOf(l)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
