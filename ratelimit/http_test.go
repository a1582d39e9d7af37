package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// byClient keys requests by the X-Client header, as an API key would be.
func byClient(r *http.Request) string { return r.Header.Get("X-Client") }

// serve sends one request from client through h.
func serve(h http.Handler, client string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("X-Client", client)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// fields returns the rate-limit fields of a response, "" where absent.
func fields(rec *httptest.ResponseRecorder) [4]string {
	h := rec.Header()
	return [4]string{h.Get("RateLimit-Limit"), h.Get("RateLimit-Remaining"), h.Get("RateLimit-Reset"), h.Get("Retry-After")}
}

func TestMiddlewareAnswers429WithTheFields(t *testing.T) {
	db, clock := openDB(t)
	l, err := ratelimit.NewFixedWindow(db, 2, time.Minute)
	require.NoError(t, err)
	served := 0
	h, err := ratelimit.NewMiddleware(l, byClient, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served++
		w.WriteHeader(http.StatusNoContent)
	}))
	require.NoError(t, err)

	clock.Advance(500 * time.Millisecond) // 59.5s left in the window: rounded up
	rec := serve(h, "alice")
	assert.Equal(t, http.StatusNoContent, rec.Code)
	assert.Equal(t, [4]string{"2", "1", "60", ""}, fields(rec), "allowed: the fields, no Retry-After")
	rec = serve(h, "alice")
	assert.Equal(t, http.StatusNoContent, rec.Code)
	assert.Equal(t, [4]string{"2", "0", "60", ""}, fields(rec))

	clock.Advance(20 * time.Second)
	rec = serve(h, "alice")
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, [4]string{"2", "0", "40", "40"}, fields(rec), "refused: Reset names the moment Retry-After does")
	assert.Equal(t, 2, served, "a refused request never reaches the handler")

	rec = serve(h, "bob")
	assert.Equal(t, http.StatusNoContent, rec.Code, "another key")
	assert.Equal(t, 3, served)

	clock.Advance(40 * time.Second)
	assert.Equal(t, http.StatusNoContent, serve(h, "alice").Code, "after Retry-After")
}

func TestMiddlewareRetryAfterIsAtLeastASecond(t *testing.T) {
	db, clock := openDB(t)
	l, err := ratelimit.NewTokenBucket(db, 100, time.Second) // a token every 10ms
	require.NoError(t, err)
	h, err := ratelimit.NewMiddleware(l, byClient, http.NotFoundHandler())
	require.NoError(t, err)
	for range 100 {
		require.Equal(t, http.StatusNotFound, serve(h, "c").Code)
	}
	rec := serve(h, "c")
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, [4]string{"100", "0", "1", "1"}, fields(rec), "10ms rounds up to 1s, never 0")
	clock.Advance(10 * time.Millisecond)
	assert.Equal(t, http.StatusNotFound, serve(h, "c").Code)
}

// refuser is a Limiter of the caller's own that refuses every request
// without saying when to retry.
type refuser struct{}

func (refuser) Allow(ctx context.Context, key string) (ratelimit.Decision, error) {
	return refuser{}.AllowN(ctx, key, 1)
}

func (refuser) AllowN(context.Context, string, int64) (ratelimit.Decision, error) {
	return ratelimit.Decision{Limit: 1}, nil
}

// TestMiddlewareRetryAfterIsAtLeastASecondFromAnyLimiter: a Limiter of the
// caller's own that refuses with no RetryAfter still gets a Retry-After of
// a second, never 0, which a client would retry at once, forever.
func TestMiddlewareRetryAfterIsAtLeastASecondFromAnyLimiter(t *testing.T) {
	h, err := ratelimit.NewMiddleware(refuser{}, byClient, http.NotFoundHandler())
	require.NoError(t, err)
	rec := serve(h, "c")
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, [4]string{"1", "0", "1", "1"}, fields(rec))
}

// negative is a Limiter of the caller's own whose Decision says less than
// zero in every number: a quota it computed wrong.
type negative struct{ allowed bool }

func (l negative) Allow(ctx context.Context, key string) (ratelimit.Decision, error) {
	return l.AllowN(ctx, key, 1)
}

func (l negative) AllowN(context.Context, string, int64) (ratelimit.Decision, error) {
	return ratelimit.Decision{Allowed: l.allowed, Limit: -3, Remaining: -5, RetryAfter: -time.Second, Reset: -time.Second}, nil
}

// TestMiddlewareFieldsAreNeverNegative: the fields are non-negative
// integers, as the draft defines them, whatever a Limiter of the caller's
// own says: a negative Limit or Remaining is sent as 0 (it was sent as it
// was: RateLimit-Remaining: -5), a negative Reset as 0, and a refusal's
// Retry-After is still a second.
func TestMiddlewareFieldsAreNeverNegative(t *testing.T) {
	for _, c := range []struct {
		allowed bool
		code    int
		want    [4]string
	}{
		{true, http.StatusNotFound, [4]string{"0", "0", "0", ""}},
		{false, http.StatusTooManyRequests, [4]string{"0", "0", "1", "1"}},
	} {
		h, err := ratelimit.NewMiddleware(negative{c.allowed}, byClient, http.NotFoundHandler())
		require.NoError(t, err)
		rec := serve(h, "c")
		assert.Equal(t, c.code, rec.Code, "allowed %v", c.allowed)
		assert.Equal(t, c.want, fields(rec), "allowed %v", c.allowed)
	}
}

func TestMiddlewareFailsClosed(t *testing.T) {
	db, _ := openDB(t)
	l, err := ratelimit.NewFixedWindow(db, 100, time.Minute)
	require.NoError(t, err)
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("a request the limiter could not decide reached the handler")
	})

	h, err := ratelimit.NewMiddleware(l, byClient, next)
	require.NoError(t, err)
	// A key no limiter takes is the client's fault: 400, never the handler.
	for _, client := range []string{"", strings.Repeat("k", 1020), "bad\xff"} {
		rec := serve(h, client)
		assert.Equal(t, http.StatusBadRequest, rec.Code, "client key %q", cut(client))
		assert.Equal(t, [4]string{}, fields(rec))
	}

	var got error
	h, err = ratelimit.NewMiddleware(l, byClient, next, ratelimit.OnError(func(w http.ResponseWriter, _ *http.Request, err error) {
		got = err
		http.Error(w, "no client key", http.StatusUnauthorized)
	}))
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, serve(h, "").Code)
	assert.ErrorIs(t, got, ratelimit.ErrInvalidRequest)

	require.NoError(t, db.Close())
	h, err = ratelimit.NewMiddleware(l, byClient, next)
	require.NoError(t, err)
	assert.Equal(t, http.StatusInternalServerError, serve(h, "alice").Code, "a closed file")
}

func TestMiddlewareBadConfiguration(t *testing.T) {
	db, _ := openDB(t)
	l, err := ratelimit.NewFixedWindow(db, 1, time.Minute)
	require.NoError(t, err)
	next := http.NotFoundHandler()
	for name, mk := range map[string]func() (http.Handler, error){
		"nil limiter": func() (http.Handler, error) { return ratelimit.NewMiddleware(nil, byClient, next) },
		"nil *FixedWindow": func() (http.Handler, error) {
			var nilWindow *ratelimit.FixedWindow
			return ratelimit.NewMiddleware(nilWindow, byClient, next)
		},
		"nil key":    func() (http.Handler, error) { return ratelimit.NewMiddleware(l, nil, next) },
		"nil next":   func() (http.Handler, error) { return ratelimit.NewMiddleware(l, byClient, nil) },
		"nil option": func() (http.Handler, error) { return ratelimit.NewMiddleware(l, byClient, next, nil) },
		"nil OnError": func() (http.Handler, error) {
			return ratelimit.NewMiddleware(l, byClient, next, ratelimit.OnError(nil))
		},
	} {
		h, err := mk()
		assert.True(t, errors.Is(err, ratelimit.ErrInvalidConfig), "%s: %v", name, err)
		assert.Nil(t, h, name)
	}
}

// cut shortens a long client key for a message.
func cut(s string) string {
	if len(s) > 16 {
		return s[:16] + "..."
	}
	return s
}
