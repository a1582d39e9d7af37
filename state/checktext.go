package state

import (
	"context"
	"encoding/hex"
	"fmt"
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

// rowName names a row in a finding by its key as SQLite's quote() would
// ('text', X'626C6F62', 42, NULL), from the key's bytes: quote() ends a
// text at its first NUL. A text that is itself a finding (a NUL byte, not
// UTF-8) is named in Go's quoting, as checkTextColumn names it.
func rowName(key any) string {
	switch k := key.(type) {
	case nil:
		return "NULL"
	case string:
		if strings.IndexByte(k, 0) >= 0 || !utf8.ValidString(k) {
			return strconv.Quote(k)
		}
		return "'" + strings.ReplaceAll(k, "'", "''") + "'"
	case []byte:
		return "X'" + strings.ToUpper(hex.EncodeToString(k)) + "'"
	case float64:
		return strconv.FormatFloat(k, 'g', 15, 64)
	}
	return fmt.Sprint(key)
}
