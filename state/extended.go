package state

import (
	"database/sql/driver"
	"fmt"
	"sync"
	"sync/atomic"

	sqlite "modernc.org/sqlite"
)

// How a grant learns that it extended a live lease of its owner rather than
// granting it anew. Its upsert (leaseGrantSQL) is one statement, which
// RETURNING cannot make say so: it sees the row as written, and an
// extension and a new grant both write it. So the upsert's branch that keeps
// the token calls statekit_extended with the grant's number, which records
// it here, and the grant takes the record back once the statement ran.
// SQLite calls a function in a CASE only on the branch taken, and in an
// upsert's SET only for a row its WHERE kept. A second statement (a read
// of the row before it, or a second UPDATE) would cost every grant, or
// every extension, a statement and a step of the file's I/O.

// grantNumbers numbers grants, process-wide: SQL functions are registered
// with the driver for every connection of the process.
var grantNumbers atomic.Int64

// extendedGrants holds the numbers of grants whose statement took the
// extension's branch, until the grant takes its own back.
var extendedGrants sync.Map

func init() {
	// statekit_extended(n, token) records grant n as an extension and
	// returns token. Non-deterministic, so SQLite never evaluates it
	// outside its CASE branch.
	sqlite.MustRegisterScalarFunction("statekit_extended", 2,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			n, ok := args[0].(int64)
			if !ok {
				return nil, fmt.Errorf("statekit_extended: grant number %T", args[0])
			}
			extendedGrants.Store(n, struct{}{})
			return args[1], nil
		})
}

// tookExtended reports whether grant n's statement took the extension's
// branch, and forgets it: call it once the statement ran, whatever it
// returned, so no record outlives its grant.
func tookExtended(n int64) bool {
	_, ok := extendedGrants.LoadAndDelete(n)
	return ok
}
