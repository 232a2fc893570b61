package backup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A restore by swap of a dump in streams builds each stream's indexes as soon as that stream's
// data is in, while the other streams' data still goes in, instead of waiting for the slowest
// stream: the cores the finished streams leave idle build their indexes. A foreign key is
// checked as soon as the streams of both its tables are complete; what is left of post-data
// (triggers, rules, anything that waits for more) runs once every stream is in.
//
// Which post-data entries belong to a stream is read from the schema's archive: pg_restore
// --list names each entry's type, and pg_restore --verbose --file prints, above each entry's
// SQL, its TOC entry ID and the IDs it depends on. An INDEX or a CONSTRAINT (a primary key, a
// unique, check or exclusion constraint: never a foreign key, whose type is FK CONSTRAINT)
// whose only table dependencies are tables of one stream is built with that stream; each
// locks only its own table, which no other pass touches then. Foreign keys lock two tables
// each, so they are built one pass at a time, never beside another pass on their tables: two
// passes cannot wait for each other. In a pass, each key is added NOT VALID and then
// validated, the validations in parallel (splitForeignKey): built whole, the keys that
// reference one table (every key to runs) would be checked one after the other. A wrong
// guess costs time, not correctness: an index or a key built before its table's data is in
// is maintained by the COPY, and the server's locks order the two.

// postDataPlan is the post-data entries of a dump in streams, by when they are built.
type postDataPlan struct {
	// early[i] are the TOC entry IDs built once stream i's data is in: the indexes and keys
	// of its tables (the schema's stream's: the small tables').
	early [][]int
	// fks are the foreign keys, built once the streams they wait for are complete (their data
	// in, their early entries built).
	fks []foreignKey
	// rest are the IDs built at the end; all lists keep the archive's order.
	rest []int
	// settings are the statements pg_restore starts a session with (search_path,
	// statement_timeout...), for the sessions that build the foreign keys.
	settings []string
}

// foreignKey is an FK CONSTRAINT entry and the streams it waits for.
type foreignKey struct {
	id    int
	needs []int
	// add creates the key NOT VALID and validate checks it (see splitForeignKey); both empty
	// when the entry's SQL is not the one statement pg_dump writes for a validated key, and
	// pg_restore builds it.
	add, validate string
}

// tocEntry is one line of pg_restore --list: an entry's ID, type and, for a TABLE, its name.
type tocEntry struct {
	id   int
	desc string
	rest string // after the type: the schema, the name and the owner, separated by spaces
}

// tocTypes are the entry types whose name may contain a space, longest first, so that a line
// of pg_restore --list is split at the right place.
var tocTypes = []string{"FK CONSTRAINT", "INDEX ATTACH", "TABLE DATA", "DEFAULT ACL", "SEQUENCE SET", "SEQUENCE OWNED BY", "MATERIALIZED VIEW DATA", "MATERIALIZED VIEW"}

// parseTOCList reads pg_restore --list: "ID; tableoid oid TYPE schema name owner" per entry,
// comments after ';'.
func parseTOCList(listing []byte) map[int]tocEntry {
	out := map[int]tocEntry{}
	for _, line := range strings.Split(string(listing), "\n") {
		if line == "" || line[0] == ';' {
			continue
		}
		idText, rest, ok := strings.Cut(line, "; ")
		id, err := strconv.Atoi(idText)
		if !ok || err != nil {
			continue
		}
		f := strings.SplitN(rest, " ", 3) // tableoid, oid, the rest
		if len(f) < 3 {
			continue
		}
		e := tocEntry{id: id}
		for _, t := range tocTypes {
			if after, ok := strings.CutPrefix(f[2], t+" "); ok {
				e.desc, e.rest = t, after
				break
			}
		}
		if e.desc == "" {
			e.desc, e.rest, _ = strings.Cut(f[2], " ")
		}
		out[id] = e
	}
	return out
}

// tableIDs maps the TOC entry ID of each streamed table (given as "schema.name", as the
// manifest lists them) to its stream. A table name may hold dots and spaces: a TABLE line
// whose schema and name could be read as two tables of the streams is left out (its entries
// are then built at the end), and so is a table that matches two lines.
func tableIDs(entries map[int]tocEntry, streams [][]string) map[int]int {
	matches := map[string][]int{} // table -> TABLE entry IDs whose line it matches
	owner := map[int]int{}        // TABLE entry ID -> stream
	claimed := map[int]int{}      // TABLE entry ID -> how many tables match it
	for i, tables := range streams {
		for _, q := range tables {
			for j := 0; j < len(q); j++ {
				if q[j] != '.' {
					continue
				}
				prefix := q[:j] + " " + q[j+1:] + " "
				for id, e := range entries {
					if e.desc == "TABLE" && strings.HasPrefix(e.rest, prefix) && !strings.Contains(e.rest[len(prefix):], " ") {
						matches[q] = append(matches[q], id)
						claimed[id]++
						owner[id] = i
					}
				}
			}
		}
	}
	out := map[int]int{}
	for _, ids := range matches {
		if len(ids) == 1 && claimed[ids[0]] == 1 {
			out[ids[0]] = owner[ids[0]]
		}
	}
	return out
}

// planPostData assigns each post-data entry (ids, in the archive's order) to the stream whose
// data it waits for alone, to the foreign keys that wait for their streams, or to the rest.
// streams[i] are stream i's tables (none listed for the schema's stream: every table that is
// not another stream's is its).
func planPostData(entries map[int]tocEntry, ids []int, deps map[int][]int, streams [][]string) *postDataPlan {
	tables := tableIDs(entries, streams)
	for id, e := range entries {
		if _, ok := tables[id]; !ok && e.desc == "TABLE" {
			tables[id] = 0
		}
	}
	postData := map[int]bool{}
	for _, id := range ids {
		postData[id] = true
	}
	plan := &postDataPlan{early: make([][]int, len(streams))}
	earlyIn := map[int]int{} // early entry -> its stream
	// waitsFor adds to needs the streams that entry d, a dependency, waits for; false when it
	// may not be built before the last pass.
	waitsFor := func(d int, needs map[int]bool, postDataOK bool) bool {
		dep, known := entries[d]
		if s, ok := tables[d]; ok {
			needs[s] = true
			return true
		}
		if s, ok := earlyIn[d]; ok && postDataOK {
			needs[s] = true
			return true
		}
		// Restored before the data (a function, a type, a collation): no wait.
		return known && dep.desc != "TABLE" && !postData[d]
	}
	for _, id := range ids {
		if d := entries[id].desc; d != "INDEX" && d != "CONSTRAINT" {
			continue
		}
		needs := map[int]bool{}
		ok := true
		for _, d := range deps[id] {
			ok = ok && waitsFor(d, needs, false)
		}
		if ok && len(needs) == 1 {
			for s := range needs {
				plan.early[s] = append(plan.early[s], id)
				earlyIn[id] = s
			}
		}
	}
	for _, id := range ids {
		if _, early := earlyIn[id]; early {
			continue
		}
		if entries[id].desc == "FK CONSTRAINT" {
			needs := map[int]bool{}
			ok := len(deps[id]) > 0
			for _, d := range deps[id] {
				ok = ok && waitsFor(d, needs, true)
			}
			if ok {
				fk := foreignKey{id: id}
				for s := range needs {
					fk.needs = append(fk.needs, s)
				}
				slices.Sort(fk.needs)
				plan.fks = append(plan.fks, fk)
				continue
			}
		}
		plan.rest = append(plan.rest, id)
	}
	return plan
}

// ready returns the foreign keys not yet taken whose streams are all complete, and marks them
// taken.
func (p *postDataPlan) ready(complete, taken map[int]bool) []int {
	var out []int
	for _, fk := range p.fks {
		if taken[fk.id] || !all(fk.needs, func(s int) bool { return complete[s] }) {
			continue
		}
		taken[fk.id] = true
		out = append(out, fk.id)
	}
	return out
}

func all(xs []int, ok func(int) bool) bool {
	for _, x := range xs {
		if !ok(x) {
			return false
		}
	}
	return true
}

// readPostDataPlan reads the plan from the schema's archive (the spool file) with the local
// pg_restore.
func (s *swapRestore) readPostDataPlan(ctx context.Context, spoolFile string, parts []DumpPart) (*postDataPlan, error) {
	var listing, sql bytes.Buffer
	stderr := newTail(4096)
	if err := s.target.Run(ctx, "pg_restore", []string{"--list", spoolFile}, Stdio{Stdout: &listing, Stderr: stderr}); err != nil {
		return nil, fmt.Errorf("pg_restore --list: %w", withStderr(err, stderr))
	}
	if err := s.target.Run(ctx, "pg_restore", []string{"--verbose", "--section=post-data", "--file=-", spoolFile}, Stdio{Stdout: &sql, Stderr: stderr}); err != nil {
		return nil, fmt.Errorf("pg_restore --section=post-data --file: %w", withStderr(err, stderr))
	}
	streams := make([][]string, len(parts))
	for i, p := range parts {
		streams[i] = p.Tables
	}
	parsed := parsePostDataSQL(sql.Bytes())
	plan := planPostData(parseTOCList(listing.Bytes()), parsed.ids, parsed.deps, streams)
	plan.settings = parsed.settings
	for i, fk := range plan.fks {
		plan.fks[i].add, plan.fks[i].validate, _ = splitForeignKey(parsed.statements[fk.id])
	}
	return plan, nil
}

// postDataSQL is what the SQL of pg_restore --verbose --section=post-data --file says.
type postDataSQL struct {
	ids        []int         // each entry's ID (its "-- TOC entry N" comment), in the archive's order
	deps       map[int][]int // the IDs of each entry's "-- Dependencies:" line
	statements map[int]string
	// settings are the statements written before the first entry (search_path,
	// statement_timeout...), with which pg_restore starts every session.
	settings []string
}

// parsePostDataSQL reads the SQL of pg_restore --verbose --file. Statements are kept without
// comments or psql's meta-commands.
func parsePostDataSQL(sql []byte) postDataSQL {
	out := postDataSQL{deps: map[int][]int{}, statements: map[int]string{}}
	current, inHeader := -1, false // inHeader: in the comment block above current's SQL
	for line := range strings.SplitSeq(string(sql), "\n") {
		if rest, ok := strings.CutPrefix(line, "-- TOC entry "); ok {
			idText, _, _ := strings.Cut(rest, " ")
			if id, err := strconv.Atoi(idText); err == nil {
				current, inHeader = id, true
				out.ids = append(out.ids, id)
				out.deps[id] = nil
			}
			continue
		}
		if rest, ok := strings.CutPrefix(line, "-- Dependencies: "); ok && inHeader {
			for _, d := range strings.Fields(rest) {
				if n, err := strconv.Atoi(d); err == nil {
					out.deps[current] = append(out.deps[current], n)
				}
			}
			continue
		}
		if !strings.HasPrefix(line, "--") {
			inHeader = false
		}
		switch {
		case strings.HasPrefix(line, "--") || strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "\\"):
			// psql's meta-commands: \restrict and \unrestrict (pg_dump since 17.6, 15.14...)
			// fence the whole script, not an entry.
		case current < 0:
			out.settings = append(out.settings, line)
		default:
			out.statements[current] += line + "\n"
		}
	}
	return out
}

// splitForeignKey turns the statement pg_dump writes for a validated foreign key,
//
//	ALTER TABLE ONLY <table>
//	    ADD CONSTRAINT <name> FOREIGN KEY ...;
//
// into two: adding the key NOT VALID, which checks no row and holds its locks (SHARE ROW
// EXCLUSIVE on both tables) only for an instant, and validating it, which scans the rows
// under locks that let other validations and index builds on the same tables run at once
// (SHARE UPDATE EXCLUSIVE on the key's table, ROW SHARE on the one it references). Built as
// one statement, the keys that reference the same table are checked one after the other.
// Once validated, the key is what the single statement makes. ok is false for any other
// statement, a key dumped NOT VALID among them.
func splitForeignKey(statement string) (add, validate string, ok bool) {
	head, def, found := strings.Cut(strings.TrimSpace(statement), "\n")
	table, isOnly := strings.CutPrefix(head, "ALTER TABLE ONLY ")
	def, isAdd := strings.CutPrefix(def, "    ADD CONSTRAINT ")
	if !found || !isOnly || !isAdd || !strings.HasSuffix(def, ";") || strings.HasSuffix(def, " NOT VALID;") ||
		strings.Contains(def, " NOT ENFORCED") { // never validated
		return "", "", false
	}
	name, rest, ok := cutIdentifier(def)
	if !ok || !strings.HasPrefix(rest, " FOREIGN KEY ") || strings.Contains(rest, "\n") {
		return "", "", false
	}
	return head + "\n    ADD CONSTRAINT " + strings.TrimSuffix(def, ";") + " NOT VALID;",
		"ALTER TABLE ONLY " + table + " VALIDATE CONSTRAINT " + name + ";", true
}

// cutIdentifier cuts an SQL identifier as pg_dump writes one (in double quotes, a doubled
// quote standing for one, where it has to be) from the start of s.
func cutIdentifier(s string) (ident, rest string, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		end := strings.IndexByte(s, ' ')
		if end <= 0 {
			return "", "", false
		}
		return s[:end], s[end:], true
	}
	for i := 1; i < len(s); i++ {
		if s[i] != '"' {
			continue
		}
		if i+1 < len(s) && s[i+1] == '"' {
			i++
			continue
		}
		return s[:i+1], s[i+1:], true
	}
	return "", "", false
}

// writeList writes ids as a pg_restore --use-list file in dir.
func writeList(dir, name string, ids []int) (string, error) {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%d;\n", id)
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}
