package main

import (
	"context"
	"flag"
	"strconv"
	"time"

	"github.com/statekit/statekit/state"
)

var leasesCommand = &command{
	name:    "leases",
	args:    "FILE [--all] [--json]",
	summary: "print leases with owner, fencing token and time left",
	details: `
Print the leases held now in FILE, by name, with owner, fencing token and
time left. --all adds the free ones, expired or released, with their last
owner and token: the next grant of that name gets the token after it; the
TTL column of an expired one says how long ago it ran out.
--json prints one object per lease: {"name", "owner", "token", "status"
(held, expired or released), "expires", "ttl_ms"}.

leases opens FILE read-only.`,
	example: `
$ statectl leases app.state --all
NAME     OWNER        TOKEN  STATUS    TTL
backup   web-2:1734   7      released  -
nightly  web-1:4242   12     held      24.1s`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		all := fs.Bool("all", false, "also show expired and released leases")
		asJSON := fs.Bool("json", false, "print one JSON object per lease")
		return func(a *app, pos, _ []string) error { return leases(a, pos[0], *all, *asJSON) }
	},
}

// leaseJSON is a lease as leases --json prints it.
type leaseJSON struct {
	Name    string     `json:"name"`
	Owner   string     `json:"owner"`
	Token   int64      `json:"token"`
	Status  string     `json:"status"`
	Expires *time.Time `json:"expires,omitempty"`
	TTLMs   *int64     `json:"ttl_ms,omitempty"`
}

func leases(a *app, path string, all, asJSON bool) (err error) {
	db, err := openRead(path)
	if err != nil {
		return err
	}
	defer closeDB(db, path, &err)
	t := newTable(a.stdout, a.tty, "NAME", "OWNER", "TOKEN", "STATUS", "TTL")
	j := newJSONLines(a.stdout)
	err = db.Leases(context.Background(), all, func(l state.LeaseInfo) error {
		if asJSON {
			out := leaseJSON{Name: l.Name, Owner: l.Owner, Token: l.Token, Status: l.Status.String(),
				Expires: timeJSON(l.Expires)}
			if l.Status != state.LeaseReleased {
				ms := millis(l.Left)
				out.TTLMs = &ms
			}
			return j.write(out)
		}
		return t.row(text(l.Name), text(l.Owner), strconv.FormatInt(l.Token, 10), l.Status.String(), leaseTTL(l))
	})
	if err != nil {
		return fileError(path, err)
	}
	return t.flush()
}

// leaseTTL is the TTL column of a lease.
func leaseTTL(l state.LeaseInfo) string {
	switch l.Status {
	case state.LeaseHeld:
		return dur(l.Left)
	case state.LeaseExpired:
		return dur(-l.Left) + " ago" // STATUS says expired
	}
	return "-"
}
