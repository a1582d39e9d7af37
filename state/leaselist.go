package state

import (
	"context"
	"fmt"
	"time"
)

// leasesSQL reads a page of lease rows after the name ?1 (the empty string
// for the first page); ?2 includes free ones, ?3 is now, ?4 the page size.
const leasesSQL = `SELECT name, owner, token, expires_at FROM leases
WHERE name > ?1 AND (?2 OR expires_at > ?3)
ORDER BY name LIMIT ?4`

// LeaseStatus says whether a lease row is held, and if not, why.
type LeaseStatus int

// The lease statuses.
const (
	// LeaseHeld is a granted lease whose deadline has not passed.
	LeaseHeld LeaseStatus = iota + 1
	// LeaseExpired is a lease whose holder let its deadline pass.
	LeaseExpired
	// LeaseReleased is a lease its holder released.
	LeaseReleased
)

// String returns "held", "expired" or "released".
func (s LeaseStatus) String() string {
	switch s {
	case LeaseHeld:
		return "held"
	case LeaseExpired:
		return "expired"
	case LeaseReleased:
		return "released"
	}
	return fmt.Sprintf("LeaseStatus(%d)", int(s))
}

// LeaseInfo is one row of the lease table, as Leases reports it. A row is
// never deleted, so a free lease still shows its last owner and token; the
// next grant gets Token+1.
type LeaseInfo struct {
	Name    string        // the lease's name
	Owner   string        // the holder, or the last holder of a free lease
	Token   int64         // the fencing token of the current or last grant
	Expires time.Time     // when the lease ends unless renewed; the zero Time once released
	Left    time.Duration // time until Expires: zero or less for a free lease
	Status  LeaseStatus   // held, expired or released
}

// Leases calls fn for each lease, in byte order of the names: the held ones,
// and with includeFree also the expired and released ones with their last
// owner and token. Like Scan, it reads a page at a time and calls fn outside
// the handle's lock, and stops at fn's first error, returning it.
//
// Leases returns ErrInvalidArgument for a nil fn, ErrClosed after Close,
// and the errors of a failed read
// (ErrBusy, ErrIO, ErrCorrupt).
func (db *DB) Leases(ctx context.Context, includeFree bool, fn func(LeaseInfo) error) error {
	if fn == nil {
		return db.named("leases", "", fmt.Errorf("%w: nil Leases callback", ErrInvalidArgument))
	}
	if db.remote != nil {
		return db.remoteList("leases", "", func(r remote, keep func(error) error) error {
			return r.Leases(ctx, includeFree, func(l LeaseInfo) error { return keep(fn(l)) })
		})
	}
	after := ""
	for {
		var page []LeaseInfo
		err := db.do(ctx, reading, func(now int64) (err error) {
			page, err = db.leasePage(ctx, after, includeFree, now)
			return err
		})
		if err != nil {
			return db.named("leases", "", err)
		}
		for _, l := range page {
			if err := fn(l); err != nil {
				return err
			}
		}
		if len(page) < scanPageRows {
			return nil
		}
		after = page[len(page)-1].Name
	}
}

// leasePage reads up to scanPageRows lease rows. Callers hold mu.
func (db *DB) leasePage(ctx context.Context, after string, free bool, now int64) ([]LeaseInfo, error) {
	rows, err := db.conn.QueryContext(ctx, leasesSQL, after, free, now, scanPageRows)
	if err != nil {
		return nil, classify(ctx, err)
	}
	defer rows.Close()
	var page []LeaseInfo
	for rows.Next() {
		var l LeaseInfo
		var at int64
		if err := rows.Scan(&l.Name, &l.Owner, &l.Token, &at); err != nil {
			return nil, classify(ctx, err)
		}
		switch {
		case at > now:
			l.Status = LeaseHeld
		case at == 0:
			l.Status = LeaseReleased
		default:
			l.Status = LeaseExpired
		}
		if at != 0 {
			l.Expires = time.UnixMilli(at)
			l.Left = millisDuration(at - now)
		}
		page = append(page, l)
	}
	return page, classify(ctx, rows.Err())
}
