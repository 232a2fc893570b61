package backup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
)

// A stream's tables are loaded frozen. Rows that COPY writes into a table truncated (or
// created) in the same transaction can be written already frozen (COPY ... WITH (FREEZE)):
// nothing later has to look up whether their transaction committed, set the hint bits, and
// write every page of the table out a second time because of them, which the index builds and
// the row count otherwise do (e2e/bench/backup shows the backends' writes and the server's CPU
// fall by that). Our process loads a stream's archive that way (copyload.go); for an archive it
// leaves to pg_restore, which has no option for it, the data go through pg_restore's SQL
// (--file=-) into one psql transaction, and each COPY of an ordinary table of the new database
// is preceded by TRUNCATE of that (still empty) table and asks for FREEZE.
// With wal_level=minimal the same pair also skips the WAL of the table's data.

// frozenTables maps the new database's ordinary tables (not partitioned, foreign, temporary or
// unlogged), as the manifest names them ("schema.name"), to their names as pg_dump writes them
// in a COPY: schema and name quoted where needed, by the server's quote_ident, whose rules are
// pg_dump's. Read as JSON: a name may hold any character.
func frozenTables(ctx context.Context, db Target) (map[string]string, error) {
	out, err := psqlQuery(ctx, db, "SELECT coalesce(json_agg(json_build_array(n.nspname || '.' || c.relname, format('%I.%I', n.nspname, c.relname))), '[]') "+
		"FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "+
		"WHERE c.relkind = 'r' AND c.relpersistence = 'p' AND n.nspname NOT IN ('pg_catalog', 'information_schema')")
	if err != nil {
		return nil, fmt.Errorf("listing the new database's tables: %w", err)
	}
	var rows [][2]string
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		return nil, fmt.Errorf("listing the new database's tables: unexpected answer %q: %w", out, err)
	}
	tables := make(map[string]string, len(rows))
	for _, r := range rows {
		tables[r[0]] = r[1]
	}
	return tables, nil
}

// streamFrozen are the tables of one stream (as the manifest lists them) that are loaded
// frozen, by their names in a COPY: only a stream's own tables are ever truncated, whatever
// its archive holds.
func streamFrozen(all map[string]string, streamTables []string) map[string]bool {
	out := map[string]bool{}
	for _, t := range streamTables {
		if q, ok := all[t]; ok {
			out[q] = true
		}
	}
	return out
}

// loadFrozen is a pipeTool that loads an archive's data into db, in one transaction, its
// COPYs of tables frozen; base are pg_restore's arguments.
func loadFrozen(db Target, base []string, tables map[string]bool) pipeTool {
	return func(ctx context.Context, stdin io.Reader, stderr io.Writer) error {
		sqlR, sqlW, err := os.Pipe()
		if err != nil {
			return err
		}
		inR, inW, err := os.Pipe()
		if err != nil {
			sqlR.Close()
			sqlW.Close()
			return err
		}
		_, _ = widenPipe(sqlW), widenPipe(inW)
		// The first failure is the cause: it stops the other two (the context), which then fail
		// too, and the restore fails; the new database, with whatever psql may have committed
		// into it, is dropped.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var first error
		var once sync.Once
		fail := func(err error) {
			once.Do(func() { first = err })
			cancel()
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			defer sqlW.Close()
			if err := db.Run(ctx, "pg_restore", append(slices.Clone(base), "--data-only", "--file=-"), Stdio{Stdin: stdin, Stdout: sqlW, Stderr: stderr}); err != nil {
				fail(fmt.Errorf("pg_restore: %w", err))
			}
		})
		wg.Go(func() {
			defer inW.Close()
			defer sqlR.Close() // a pg_restore still writing gets EPIPE, not a block
			if err := freezeCopies(sqlR, inW, tables); err != nil {
				fail(fmt.Errorf("passing pg_restore's SQL to psql: %w", err))
			}
		})
		wg.Go(func() {
			defer inR.Close() // our writes to a psql that stopped fail instead of blocking
			if err := db.Run(ctx, "psql", append(slices.Clone(psqlArgs), "--single-transaction", "-f", "-"), Stdio{Stdin: inR, Stdout: io.Discard, Stderr: stderr}); err != nil {
				fail(fmt.Errorf("psql: %w", err))
			}
		})
		wg.Wait()
		return first
	}
}

// copyHeaderEnd ends the statement pg_restore writes before a table's data.
const copyHeaderEnd = " FROM stdin;\n"

// freezeCopies copies pg_restore's SQL from r to w, turning each COPY into one of tables
// into TRUNCATE ONLY and COPY ... WITH (FREEZE). The data are copied as they are, in bulk:
// a COPY's data start after a line ending in " FROM stdin;" and end at a line "\.", and no line
// of them is ever read as SQL.
func freezeCopies(r io.Reader, w io.Writer, tables map[string]bool) error {
	br := bufio.NewReaderSize(r, 256<<10)
	bw := bufio.NewWriterSize(w, 256<<10)
	for {
		// SQL, a line at a time: the statements are short, and a COPY header fits the
		// buffer (1,600 columns of 63 bytes do).
		line, err := br.ReadSlice('\n')
		if metaCommand(line) {
			return fmt.Errorf("the dump's SQL holds a psql meta-command (%.40q): refused", line)
		}
		switch {
		case err == nil && bytes.HasSuffix(line, []byte(copyHeaderEnd)):
			if _, err := bw.WriteString(frozenCopy(string(line), tables)); err != nil {
				return err
			}
			if err := copyData(br, bw); err != nil {
				return err
			}
			continue
		case errors.Is(err, bufio.ErrBufferFull), err == nil:
		case errors.Is(err, io.EOF):
			if _, err := bw.Write(line); err != nil {
				return err
			}
			return bw.Flush()
		default:
			return err
		}
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
}

// copyEnd ends a COPY's data: a line "\." (after a newline, or first).
var copyEnd = []byte("\n\\.\n")

// copyData copies a COPY's data from br to bw, its end line included, looking for the end in
// what br holds rather than line by line.
func copyData(br *bufio.Reader, bw *bufio.Writer) error {
	first := true // at the data's first line, where the end line has no newline before it
	for {
		_, short := br.Peek(len(copyEnd)) // fills the buffer; fails only near the stream's end
		held, _ := br.Peek(br.Buffered())
		end := -1
		if first && bytes.HasPrefix(held, copyEnd[1:]) {
			end = 0
		} else if i := bytes.Index(held, copyEnd); i >= 0 {
			end = i + 1
		}
		if end >= 0 {
			n := end + len(copyEnd) - 1
			if _, err := bw.Write(held[:n]); err != nil {
				return err
			}
			_, err := br.Discard(n)
			return err
		}
		if errors.Is(short, io.EOF) {
			return errors.New("pg_restore's SQL ended inside a COPY's data")
		} else if short != nil {
			return short
		}
		// All but the last bytes, which may begin the end line.
		n := len(held) - (len(copyEnd) - 1)
		if _, err := bw.Write(held[:n]); err != nil {
			return err
		}
		if _, err := br.Discard(n); err != nil {
			return err
		}
		first = false
	}
}

// metaCommand says whether a line of SQL holds a psql meta-command: a backslash outside quoted
// literals, identifiers and comments (pg_restore's SQL has standard_conforming_strings on),
// other than the \restrict and \unrestrict lines pg_dump writes around it. pg_restore's SQL of
// a table's data holds none, and psql would run one (\! runs a shell command) before the
// archive's sha256 is known.
func metaCommand(line []byte) bool {
	if bytes.HasPrefix(line, []byte(`\restrict `)) || bytes.HasPrefix(line, []byte(`\unrestrict `)) {
		return false
	}
	var quote byte
	for i, c := range line {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '-' && i+1 < len(line) && line[i+1] == '-':
			return false
		case c == '\\':
			return true
		}
	}
	return false
}

// frozenCopy rewrites a COPY header for one of tables ("COPY schema.name (columns) FROM
// stdin;\n") as TRUNCATE ONLY of the table and the COPY with FREEZE; any other line is
// returned as it is.
func frozenCopy(header string, tables map[string]bool) string {
	rest, ok := strings.CutPrefix(header, "COPY ")
	if !ok {
		return header
	}
	for t := range tables {
		// A table without columns has none listed: "COPY s.t  FROM stdin;".
		if after, ok := strings.CutPrefix(rest, t+" "); ok && (strings.HasPrefix(after, "(") || after == copyHeaderEnd) {
			return "TRUNCATE ONLY " + t + ";\n" + strings.TrimSuffix(header, copyHeaderEnd) + " FROM stdin WITH (FREEZE);\n"
		}
	}
	return header
}
