package state

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"
)

// textCheck is a column of text that must be what the verbs write: valid
// UTF-8 without a NUL byte (checkKey). SQLite knows neither rule, and its
// quote() ends a text at its first NUL, so these are checked here, naming
// the row by its bytes in Go's quoting.
type textCheck struct {
	table, column, what string
}

// textChecks are the columns of keys and lease names.
var textChecks = []textCheck{
	{"kv", "key", "key"},
	{"leases", "name", "name"},
}

// checkText runs the text checks.
func (db *DB) checkText(ctx context.Context, f *finder) error {
	for _, c := range textChecks {
		if f.room() == 0 {
			return nil
		}
		if err := db.checkTextColumn(ctx, f, c); err != nil {
			return err
		}
	}
	return nil
}

// checkTextColumn reads every text of one column as its bytes.
func (db *DB) checkTextColumn(ctx context.Context, f *finder, c textCheck) error {
	rows, err := db.conn.QueryContext(ctx, `SELECT CAST(`+c.column+` AS BLOB) FROM `+c.table+
		` WHERE typeof(`+c.column+`) = 'text'`)
	if err != nil {
		return classify(ctx, err)
	}
	defer rows.Close()
	for rows.Next() && f.room() > 0 {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return classify(ctx, err)
		}
		s := string(b)
		switch {
		case strings.IndexByte(s, 0) >= 0:
			f.add("%s %s: %s contains a NUL byte", c.table, strconv.Quote(s), c.what)
		case !utf8.ValidString(s):
			f.add("%s %s: %s is not valid UTF-8", c.table, strconv.Quote(s), c.what)
		}
	}
	return classify(ctx, rows.Err())
}
