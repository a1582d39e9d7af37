package stress

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/statekit/statekit/internal/checks"
	_ "modernc.org/sqlite" // the "sqlite" driver
)

// The fenced resource: what lease holders write, in its own SQLite file. It
// does what a fencing token asks of a resource: it remembers the highest
// token it accepted per lease name and refuses a lower one. Every attempt
// is logged, accepted or not, so the driver can check that no token was
// used by two holders.
const (
	resourceSchemaSQL = `
CREATE TABLE IF NOT EXISTS fence(name TEXT PRIMARY KEY, token INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS writes(
	seq      INTEGER PRIMARY KEY AUTOINCREMENT,
	name     TEXT NOT NULL,
	token    INTEGER NOT NULL,
	holder   TEXT NOT NULL,
	accepted INTEGER NOT NULL
);`
	fenceGetSQL    = `SELECT token FROM fence WHERE name = ?1`
	fenceSetSQL    = `INSERT INTO fence(name, token) VALUES (?1, ?2) ON CONFLICT(name) DO UPDATE SET token = excluded.token`
	fenceLogSQL    = `INSERT INTO writes(name, token, holder, accepted) VALUES (?1, ?2, ?3, ?4)`
	fenceWritesSQL = `SELECT name, token, holder, accepted FROM writes ORDER BY seq`
)

// resource is a handle on the fenced resource.
type resource struct {
	db *sql.DB
}

// openResource opens (and creates) the resource file at path.
func openResource(path string) (*resource, error) {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite", "file:"+esc+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, fmt.Errorf("open resource: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(resourceSchemaSQL); err != nil {
		db.Close()
		return nil, fmt.Errorf("create resource: %w", err)
	}
	return &resource{db: db}, nil
}

func (r *resource) close() error { return r.db.Close() }

// write is a holder's write under token: accepted unless the resource has
// accepted a higher token for name, and logged either way.
func (r *resource) write(ctx context.Context, name string, token int64, holder string) (accepted bool, err error) {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("fenced write: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return false, fmt.Errorf("fenced write: %w", err)
	}
	err = func() error {
		var highest int64
		if err := conn.QueryRowContext(ctx, fenceGetSQL, name).Scan(&highest); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		accepted = token >= highest
		if accepted {
			if _, err := conn.ExecContext(ctx, fenceSetSQL, name, token); err != nil {
				return err
			}
		}
		_, err := conn.ExecContext(ctx, fenceLogSQL, name, token, holder, accepted)
		return err
	}()
	if err != nil {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
		return false, fmt.Errorf("fenced write: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
		return false, fmt.Errorf("fenced write: %w", err)
	}
	return accepted, nil
}

// writes returns the log in order, and what integrity_check says.
func (r *resource) writes(ctx context.Context) ([]checks.FenceWrite, string, error) {
	var integrity string
	if err := r.db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&integrity); err != nil {
		return nil, "", fmt.Errorf("resource integrity_check: %w", err)
	}
	rows, err := r.db.QueryContext(ctx, fenceWritesSQL)
	if err != nil {
		return nil, "", fmt.Errorf("resource log: %w", err)
	}
	defer rows.Close()
	var out []checks.FenceWrite
	for rows.Next() {
		var w checks.FenceWrite
		if err := rows.Scan(&w.Name, &w.Token, &w.Holder, &w.Accepted); err != nil {
			return nil, "", fmt.Errorf("resource log: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("resource log: %w", err)
	}
	return out, integrity, nil
}
