package redistest_test

import (
	"strings"
	"testing"

	"github.com/statekit/statekit/internal/redistest"
)

func TestStartKillRestart(t *testing.T) {
	s := redistest.Start(t)
	if _, err := s.Command("SET", "a", "1"); err != nil {
		t.Fatal(err)
	}
	v, err := s.Command("CONFIG", "GET", "appendfsync")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "*2") {
		t.Fatalf("CONFIG GET: %q", v)
	}
	s.Kill()
	if err := redistest.Ping(s.Addr(), ""); err == nil {
		t.Fatal("PING answered after Kill")
	}
	s.Restart()
	got, err := s.Command("GET", "a")
	if err != nil || got != "$1" {
		t.Fatalf("after restart GET a: %q, %v (the append-only file should keep it)", got, err)
	}
	s.Stop()
	s.Stop() // idempotent
}

func TestPassword(t *testing.T) {
	s := redistest.Start(t, redistest.WithPassword("sekret"), redistest.WithoutPersistence())
	if err := redistest.Ping(s.Addr(), ""); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("PING without password: %v", err)
	}
	if err := redistest.Ping(s.Addr(), "sekret"); err != nil {
		t.Fatal(err)
	}
	if u := s.URL("p:"); !strings.Contains(u, ":sekret@") || !strings.Contains(u, "prefix=p%3A") {
		t.Fatalf("URL %q", u)
	}
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start takes a few seconds")
	}
	c := redistest.StartCluster(t, 3)
	if len(c.Addrs()) != 3 || !strings.HasPrefix(c.URL("x:"), "redis+cluster://127.0.0.1:") {
		t.Fatalf("addrs %v url %s", c.Addrs(), c.URL("x:"))
	}
}
