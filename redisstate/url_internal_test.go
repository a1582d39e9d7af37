package redisstate

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
)

func TestParseURL(t *testing.T) {
	c, err := parseURL("redis://user:pw@example.com:7000/3?prefix=app:&allow_unsafe_leases=true&dial_timeout=2s&client_name=x")
	if err != nil {
		t.Fatal(err)
	}
	o := c.single
	if c.prefix != "app:" || !c.allowUnsafe || o.Addr != "example.com:7000" || o.DB != 3 ||
		o.Username != "user" || o.Password != "pw" || o.DialTimeout != 2*time.Second || o.ClientName != "x" ||
		o.MaxRetries != -1 || !o.ContextTimeoutEnabled {
		t.Fatalf("parsed %+v / %+v", c, o)
	}
	if c, err := parseURL("redis://h?allow_unsafe_leases=false"); err != nil || c.allowUnsafe {
		t.Fatalf("allow_unsafe_leases=false: %+v %v", c, err)
	}
	c, err = parseURL("redis://secret@h")
	if err != nil || c.single.Password != "secret" || c.single.Username != "" || c.single.Addr != "h:6379" || c.prefix != "" {
		t.Fatalf("redis-cli's password form: %+v %v", c.single, err)
	}
	c, err = parseURL("rediss://:pw@h:1/0")
	if err != nil || c.single.TLSConfig == nil {
		t.Fatalf("rediss: %v", err)
	}
	c, err = parseURL("redis+cluster://:pw@a:1,b:2/?addr=c:3&prefix={app}:")
	if err != nil {
		t.Fatal(err)
	}
	addrs := slices.Sorted(slices.Values(c.cluster.Addrs))
	if got := strings.Join(addrs, " "); got != "a:1 b:2 c:3" || c.cluster.Password != "pw" || c.prefix != "{app}:" {
		t.Fatalf("cluster: %q %+v", got, c)
	}
	// go-redis would resend a command whose reply was lost (MaxRetries 0
	// means its default of 3), and let a verb outlive its context.
	if c.cluster.MaxRetries != -1 || !c.cluster.ContextTimeoutEnabled {
		t.Fatalf("cluster: MaxRetries %d, ContextTimeoutEnabled %v", c.cluster.MaxRetries, c.cluster.ContextTimeoutEnabled)
	}
}

func TestParseURLErrorsKeepThePasswordOut(t *testing.T) {
	for _, raw := range []string{
		"redis://u:hunter2@host:port/",
		"redis://u:hunter2@host:1/x",
		"redis://u:hunter2@host:1/0?x=%zz",
		"redis://u:hunter2@host:1/0?nope=1",
		"redis://u:hunter2@host:1/0#frag",
		"redis+cluster://u:hunter2@a:1,,b:2/",
		"redis+cluster://u:hunter2@a:1,b/",
		"http://u:hunter2@host/",
	} {
		_, err := parseURL(raw)
		if !errors.Is(err, state.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", raw, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", raw, err)
		}
	}
}

func TestSlot(t *testing.T) {
	// Values from the Redis Cluster specification and redis-cli CLUSTER KEYSLOT.
	for key, want := range map[string]int{"123456789": 12739, "foo": 12182, "{user1000}.following": slot("user1000")} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestClockNeverGoesBack(t *testing.T) {
	var c clock
	c.baseMs, c.at = 1_000_000, time.Now()
	c.observe(500) // behind: ignored
	if n := c.nowMs(); n < 1_000_000 {
		t.Fatalf("went back to %d", n)
	}
	c.observe(2_000_000)
	if n := c.nowMs(); n < 2_000_000 {
		t.Fatalf("did not move forward: %d", n)
	}
}
