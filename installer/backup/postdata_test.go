package backup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

// A listing's type may hold a space, and so may a name: the line is split at the type, and a
// name that could be read as two tables of the streams is matched to neither.
func TestParseTOCListAndTables(t *testing.T) {
	listing := `;
; Archive created at 2026-11-28 00:30:04 UTC
;
218; 1259 16434 TABLE public artifacts polyaxon
219; 1259 16435 TABLE public my table polyaxon
220; 1259 16436 TABLE a.b c polyaxon
221; 1259 16437 TABLE a b.c polyaxon
3240; 2606 16450 CONSTRAINT public artifacts artifacts_pkey polyaxon
3249; 2606 16480 FK CONSTRAINT public artifacts artifacts_run_id_fkey polyaxon
3394; 0 16434 TABLE DATA public artifacts polyaxon
`
	entries := parseTOCList([]byte(listing))
	assert.Equal(t, tocEntry{id: 218, desc: "TABLE", rest: "public artifacts polyaxon"}, entries[218])
	assert.Equal(t, "FK CONSTRAINT", entries[3249].desc)
	assert.Equal(t, "TABLE DATA", entries[3394].desc)
	assert.Equal(t, "CONSTRAINT", entries[3240].desc)
	tables := tableIDs(entries, [][]string{nil, {"public.artifacts"}, {"public.my table", "a.b.c"}})
	assert.Equal(t, map[int]int{218: 1, 219: 2}, tables, "a.b.c could be a.b c or a b.c: neither is taken")
}

func TestParsePostDataSQL(t *testing.T) {
	sql := `\restrict abc123
SET statement_timeout = 0;
SELECT pg_catalog.set_config('search_path', '', false);

--
-- TOC entry 3240 (class 2606 OID 16450)
-- Dependencies: 218
-- Name: artifacts artifacts_pkey; Type: CONSTRAINT; Schema: public; Owner: polyaxon
--

ALTER TABLE ONLY public.artifacts
    ADD CONSTRAINT artifacts_pkey PRIMARY KEY (id);

-- Dependencies: 999 (in a statement's body, not a header)

--
-- TOC entry 3249 (class 2606 OID 16480)
-- Dependencies: 218 3231
-- Name: artifacts artifacts_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: polyaxon
--

ALTER TABLE ONLY public.artifacts
    ADD CONSTRAINT artifacts_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id);

--
-- TOC entry 3300 (class 1259 OID 16500)
-- Name: lonely; Type: INDEX; Schema: public; Owner: polyaxon
--

\unrestrict abc123
`
	parsed := parsePostDataSQL([]byte(sql))
	assert.Equal(t, []int{3240, 3249, 3300}, parsed.ids)
	assert.Equal(t, map[int][]int{3240: {218}, 3249: {218, 3231}, 3300: nil}, parsed.deps)
	assert.Equal(t, []string{"SET statement_timeout = 0;", "SELECT pg_catalog.set_config('search_path', '', false);"}, parsed.settings,
		"what comes before the first entry, without the meta-command")
	assert.Equal(t, map[int]string{
		3240: "ALTER TABLE ONLY public.artifacts\n    ADD CONSTRAINT artifacts_pkey PRIMARY KEY (id);\n",
		3249: "ALTER TABLE ONLY public.artifacts\n    ADD CONSTRAINT artifacts_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id);\n",
	}, parsed.statements, "no comment and no meta-command is part of a statement")
}

// The plan of a real dump in streams: each table's keys and indexes are built with its
// stream (the small tables' with the schema's), each foreign key once the streams of its two
// tables are complete, every entry once.
func TestPostDataPlan(t *testing.T) {
	ctx := context.Background()
	s, m, _ := streamsBackup(t, "postdata_plan")
	parts := m.Parts()
	spoolFile, err := spool(ctx, filepath.Join(m.Dir, parts[0].File), parts[0], m.Compression.Codec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.Remove(spoolFile) })
	sw := &swapRestore{target: localTarget(s, "postdata_plan", s.BinDir)}
	plan, err := sw.readPostDataPlan(ctx, spoolFile, parts)
	require.NoError(t, err)

	var listing strings.Builder
	require.NoError(t, sw.target.Run(ctx, "pg_restore", []string{"--list", "--section=post-data", spoolFile}, Stdio{Stdout: &listing}))
	entries := parseTOCList([]byte(listing.String()))
	name := func(id int) string { return entries[id].desc + " " + strings.TrimSuffix(entries[id].rest, " "+s.User) }
	streamOf := map[string]int{"public.owners": 0, "public.projects": 0}
	for i, p := range parts {
		for _, table := range p.Tables {
			streamOf[table] = i
		}
	}
	seen := map[int]bool{}
	once := func(id int) {
		assert.False(t, seen[id], "%s planned twice", name(id))
		seen[id] = true
	}
	for _, ids := range plan.early {
		for _, id := range ids {
			once(id)
			assert.Contains(t, []string{"INDEX", "CONSTRAINT"}, entries[id].desc, "%s built with a stream", name(id))
		}
	}
	fks := map[string][]int{}
	for _, fk := range plan.fks {
		once(fk.id)
		fks[name(fk.id)] = fk.needs
	}
	for _, id := range plan.rest {
		once(id)
	}
	assert.Len(t, seen, len(entries), "every post-data entry is planned")

	early := func(table string) []string {
		var out []string
		for _, id := range plan.early[streamOf[table]] {
			out = append(out, name(id))
		}
		return out
	}
	require.NotZero(t, streamOf["public.runs"])
	assert.Subset(t, early("public.runs"), []string{"CONSTRAINT public runs runs_pkey", "CONSTRAINT public runs runs_uuid_key",
		"INDEX public runs_status", "INDEX public runs_kind", "INDEX public runs_project_created"})
	require.NotZero(t, streamOf[`Odd.we"ird.*?`])
	assert.Contains(t, early(`Odd.we"ird.*?`), `CONSTRAINT Odd we"ird.*? we"ird.*?_pkey`)
	assert.Subset(t, early("public.owners"), []string{"CONSTRAINT public owners owners_pkey", "CONSTRAINT public projects projects_pkey"},
		"the small tables' keys are built with the schema's stream")
	assert.Equal(t, []int{0, streamOf["public.runs"]}, fks["FK CONSTRAINT public runs runs_project_id_fkey"])
	odd := []int{streamOf[`Odd.we"ird.*?`], streamOf["public.runs"]}
	slices.Sort(odd)
	assert.Equal(t, slices.Compact(odd), fks[`FK CONSTRAINT Odd we"ird.*? we"ird.*?_run_id_fkey`])
	assert.Equal(t, []string{"TRIGGER Odd weird weird_touch"}, nameAll(plan.rest, name), "only the trigger waits for the end")

	// Validated keys are split in two; the key dumped NOT VALID is left to pg_restore.
	split := map[string][2]string{}
	for _, fk := range plan.fks {
		split[name(fk.id)] = [2]string{fk.add, fk.validate}
	}
	assert.Equal(t, [2]string{"ALTER TABLE ONLY public.runs\n    ADD CONSTRAINT runs_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) NOT VALID;",
		"ALTER TABLE ONLY public.runs VALIDATE CONSTRAINT runs_project_id_fkey;"}, split["FK CONSTRAINT public runs runs_project_id_fkey"])
	assert.Equal(t, `ALTER TABLE ONLY "Odd"."we""ird.*?" VALIDATE CONSTRAINT "we""ird.*?_run_id_fkey";`,
		split[`FK CONSTRAINT Odd we"ird.*? we"ird.*?_run_id_fkey`][1])
	assert.Equal(t, [2]string{}, split[`FK CONSTRAINT Odd we"ird.*? not "yet" valid`])
	assert.Contains(t, plan.settings, "SET statement_timeout = 0;", "the keys' sessions start as pg_restore's do")

	// The foreign keys become ready as their streams complete, each once.
	runs := streamOf["public.runs"]
	var onlyRuns []string
	for _, fk := range plan.fks {
		if slices.Equal(fk.needs, []int{runs}) {
			onlyRuns = append(onlyRuns, name(fk.id))
		}
	}
	taken := map[int]bool{}
	assert.ElementsMatch(t, onlyRuns, nameAll(plan.ready(map[int]bool{runs: true}, taken), name), "runs' stream alone")
	got := plan.ready(map[int]bool{0: true, runs: true}, taken)
	assert.Contains(t, nameAll(got, name), "FK CONSTRAINT public runs runs_project_id_fkey")
	all := map[int]bool{}
	for i := range parts {
		all[i] = true
	}
	rest := plan.ready(all, taken)
	assert.Len(t, rest, len(plan.fks)-len(got)-len(onlyRuns))
	assert.NotContains(t, nameAll(rest, name), "FK CONSTRAINT public runs runs_project_id_fkey", "taken once")
	assert.Empty(t, plan.ready(all, taken))
}

func TestSplitForeignKey(t *testing.T) {
	for _, tc := range []struct {
		statement, add, validate string
	}{
		{"ALTER TABLE ONLY public.metrics\n    ADD CONSTRAINT metrics_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;\n",
			"ALTER TABLE ONLY public.metrics\n    ADD CONSTRAINT metrics_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE NOT VALID;",
			"ALTER TABLE ONLY public.metrics VALIDATE CONSTRAINT metrics_run_id_fkey;"},
		{"ALTER TABLE ONLY s.t\n    ADD CONSTRAINT \"a \"\"b\"\" FOREIGN KEY\" FOREIGN KEY (x) REFERENCES s.u(id) DEFERRABLE;",
			"ALTER TABLE ONLY s.t\n    ADD CONSTRAINT \"a \"\"b\"\" FOREIGN KEY\" FOREIGN KEY (x) REFERENCES s.u(id) DEFERRABLE NOT VALID;",
			"ALTER TABLE ONLY s.t VALIDATE CONSTRAINT \"a \"\"b\"\" FOREIGN KEY\";"},
		// Left to pg_restore: a key that was not valid, one never enforced, a partitioned
		// table's (no ONLY), anything else.
		{statement: "ALTER TABLE ONLY s.t\n    ADD CONSTRAINT k FOREIGN KEY (x) REFERENCES s.u(id) NOT VALID;"},
		{statement: "ALTER TABLE ONLY s.t\n    ADD CONSTRAINT k FOREIGN KEY (x) REFERENCES s.u(id) NOT ENFORCED;"},
		{statement: "ALTER TABLE s.p\n    ADD CONSTRAINT k FOREIGN KEY (x) REFERENCES s.u(id);"},
		{statement: "ALTER TABLE ONLY s.t\n    ADD CONSTRAINT k CHECK (x > 0);"},
		{statement: "ALTER TABLE ONLY s.t\n    ADD CONSTRAINT \"unterminated FOREIGN KEY (x) REFERENCES s.u(id);"},
		{statement: "ALTER TABLE ONLY s.t\n    ADD CONSTRAINT k FOREIGN KEY (x) REFERENCES s.u(id);\nALTER TABLE ONLY s.t\n    ADD CONSTRAINT j FOREIGN KEY (y) REFERENCES s.u(id);"},
	} {
		add, validate, ok := splitForeignKey(tc.statement)
		assert.Equal(t, tc.validate != "", ok, tc.statement)
		assert.Equal(t, tc.add, add, tc.statement)
		assert.Equal(t, tc.validate, validate, tc.statement)
	}
}

func nameAll(ids []int, name func(int) string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = name(id)
	}
	return out
}

// postDataTools is a directory with psql and a pg_restore that runs the real one, except for
// the post-data pass whose list file is named like match: there it writes the marker file and
// then, when fail is set, fails after the real run, else waits to be stopped.
func postDataTools(t *testing.T, s *pgtest.Server, match string, fail bool) (dir, marker string) {
	t.Helper()
	dir = t.TempDir()
	marker = filepath.Join(dir, "reached")
	require.NoError(t, os.Symlink(s.Bin("psql"), filepath.Join(dir, "psql")))
	then := "exec " + s.Bin("pg_restore") + ` "$@"`
	if fail {
		then = s.Bin("pg_restore") + ` "$@"; echo 'pg_restore: error: injected failure' >&2; exit 1`
	} else {
		then = `sleep 60 >/dev/null 2>&1 & p=$!; trap 'kill $p; exit 143' TERM; wait $p; exit 1`
	}
	script := fmt.Sprintf("#!/bin/sh\ncase \"$*\" in\n*--use-list=*%s*) touch %s; %s ;;\nesac\nexec %s \"$@\"\n", match, marker, then, s.Bin("pg_restore"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pg_restore"), []byte(script), 0o755))
	return dir, marker
}

// A restore in streams that fails, or is cancelled, while it builds indexes (a stream's, as its
// data came in, or the last pass's) leaves the target as it was and no new database behind.
func TestStreamsPostDataFailureChangesNothing(t *testing.T) {
	ctx := context.Background()
	s, m, _ := streamsBackup(t, "streams_postdata")
	for i, c := range []struct {
		name, match string
		fail        bool
	}{
		{"a stream's indexes fail", "stream-", true},
		{"a foreign key's pass fails", "fk-", true},
		{"the last pass fails", "rest.list", true},
		{"cancelled while a stream's indexes are built", "stream-", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := fmt.Sprintf("streams_postdata_dst%d", i)
			target, before := streamsTarget(t, s, db)
			tools, marker := postDataTools(t, s, c.match, c.fail)
			target = localTarget(s, target.conn.Database, tools)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if !c.fail {
				go func() {
					for cctx.Err() == nil {
						if _, err := os.Stat(marker); err == nil {
							cancel()
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
				}()
			}
			sc := &fakeScaler{}
			_, err := Restore(cctx, target, m.Dir, WithToolsDir(s.BinDir), WithScaler(sc))
			require.Error(t, err)
			assert.FileExists(t, marker, "the failure came where it was injected")
			if c.fail {
				assert.Contains(t, err.Error(), "injected failure")
			} else {
				assert.Contains(t, err.Error(), "interrupted")
			}
			assert.Contains(t, err.Error(), db+" is unchanged")
			assert.Equal(t, sc.downs, sc.ups, "writers scaled back")
			got, err := pgtest.Checksums(ctx, s, target.conn.Database)
			require.NoError(t, err)
			assert.Equal(t, before, got)
			assertNoScratchLeft(t, s, target.conn.Database)
		})
	}
}

// A dump whose post-data cannot be planned (here pg_restore --verbose --file fails) is restored
// all the same, every index and constraint built at the end.
func TestStreamsRestoreWithoutAPlan(t *testing.T) {
	ctx := context.Background()
	s, m, want := streamsBackup(t, "streams_noplan")
	wantSchema, err := pgtest.SchemaObjects(ctx, s, "streams_noplan")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(s.Bin("psql"), filepath.Join(dir, "psql")))
	script := fmt.Sprintf("#!/bin/sh\ncase \"$*\" in\n*--verbose*) echo 'pg_restore: error: injected failure' >&2; exit 1 ;;\nesac\nexec %s \"$@\"\n", s.Bin("pg_restore"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pg_restore"), []byte(script), 0o755))
	require.NoError(t, s.CreateDatabase(ctx, "streams_noplan_dst"))
	var logs bytes.Buffer
	rr, err := Restore(ctx, localTarget(s, "streams_noplan_dst", dir), m.Dir, WithToolsDir(s.BinDir), WithLogger(testLogger(&logs)))
	require.NoError(t, err, logs.String())
	assert.Equal(t, RestoredBySwap, rr.Way)
	assert.Contains(t, logs.String(), "could not be planned")
	got, err := pgtest.Checksums(ctx, s, "streams_noplan_dst")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	gotSchema, err := pgtest.SchemaObjects(ctx, s, "streams_noplan_dst")
	require.NoError(t, err)
	assert.Equal(t, wantSchema, gotSchema)
}

// A key that does not hold fails the restore with the server's word for it; the keys that
// pg_restore builds whole go first.
func TestBuildForeignKeysReportsAViolation(t *testing.T) {
	ctx := context.Background()
	s, _ := sharedServer(t)
	require.NoError(t, s.CreateDatabase(ctx, "fk_violation"))
	_, err := s.Psql(ctx, "fk_violation", `CREATE TABLE t (id bigint PRIMARY KEY); CREATE TABLE u (x bigint);
INSERT INTO t VALUES (1); INSERT INTO u VALUES (1), (5);`)
	require.NoError(t, err)
	sw := &swapRestore{target: localTarget(s, "fk_violation", s.BinDir), jobs: 2}
	add, validate, ok := splitForeignKey("ALTER TABLE ONLY public.u\n    ADD CONSTRAINT u_x_fkey FOREIGN KEY (x) REFERENCES public.t(id);\n")
	require.True(t, ok)
	plan := &postDataPlan{settings: []string{"SET statement_timeout = 0;"},
		fks: []foreignKey{{id: 7, add: add, validate: validate}, {id: 8}}}
	var whole []int
	err = sw.buildForeignKeys(ctx, sw.target, plan, []int{7, 8}, func(_ context.Context, ids []int) error {
		whole = ids
		return nil
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "validating a foreign key")
	assert.Contains(t, err.Error(), `violates foreign key constraint "u_x_fkey"`)
	assert.Equal(t, []int{8}, whole)
}
