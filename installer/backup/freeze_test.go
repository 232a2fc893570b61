package backup

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFreezeCopiesRewritesOnlyTheHeadersOfTheNewTables(t *testing.T) {
	long := strings.Repeat("x", 600<<10) // longer than the filter's buffer
	in := "SET statement_timeout = 0;\n" +
		"COPY public.runs (id, name) FROM stdin;\n" +
		"1\tCOPY public.runs (id, name) FROM stdin;\n" + // data that reads like a header
		"COPY public.runs (id, name) FROM stdin;\n" + // a whole data line that does too
		"2\t" + long + "\n" +
		"\\.\n" +
		"COPY public.\"Odd \"\" name\" (a) FROM stdin;\n" +
		"\\.\n" + // an empty table: the end line first
		"COPY public.metrics (a) FROM stdin;\n" +
		"\\.\n" +
		"COPY public.parent (a) FROM stdin;\n" + // not an ordinary table of the new database
		"\\.x\n" + // a value, not the end
		"\\.\n" +
		"SELECT pg_catalog.setval('public.runs_id_seq', 2, true);\n"
	tables := map[string]bool{"public.runs": true, "public.metrics": true, `public."Odd "" name"`: true}
	want := "SET statement_timeout = 0;\n" +
		"TRUNCATE ONLY public.runs;\nCOPY public.runs (id, name) FROM stdin WITH (FREEZE);\n" +
		"1\tCOPY public.runs (id, name) FROM stdin;\n" +
		"COPY public.runs (id, name) FROM stdin;\n" +
		"2\t" + long + "\n" +
		"\\.\n" +
		"TRUNCATE ONLY public.\"Odd \"\" name\";\nCOPY public.\"Odd \"\" name\" (a) FROM stdin WITH (FREEZE);\n" +
		"\\.\n" +
		"TRUNCATE ONLY public.metrics;\nCOPY public.metrics (a) FROM stdin WITH (FREEZE);\n" +
		"\\.\n" +
		"COPY public.parent (a) FROM stdin;\n" +
		"\\.x\n" +
		"\\.\n" +
		"SELECT pg_catalog.setval('public.runs_id_seq', 2, true);\n"
	for name, src := range map[string]io.Reader{
		"read in bulk":  strings.NewReader(in),
		"a byte a read": iotest.OneByteReader(strings.NewReader(in)), // every boundary
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, freezeCopies(src, &out, tables))
			assert.Equal(t, want, out.String())
		})
	}
}

func TestFreezeCopiesRefusesDataCutShort(t *testing.T) {
	for _, in := range []string{
		"COPY public.runs (id) FROM stdin;\n1\n2\n",
		"COPY public.runs (id) FROM stdin;\n1\n\\.",
		"COPY public.runs (id) FROM stdin;\n",
	} {
		err := freezeCopies(strings.NewReader(in), &bytes.Buffer{}, map[string]bool{"public.runs": true})
		assert.ErrorContains(t, err, "ended inside a COPY's data", "%q", in)
	}
}

func TestFreezeCopiesZeroColumnsAndLongStatements(t *testing.T) {
	long := "SELECT pg_catalog.setval('public.s', 1, true); -- " + strings.Repeat("y", 300<<10) + "\n"
	in := "COPY public.empty  FROM stdin;\n\\.\n" + long + "COPY public.other (a) FROM stdin;\n1\n\\.\n"
	var out bytes.Buffer
	require.NoError(t, freezeCopies(strings.NewReader(in), &out, map[string]bool{"public.empty": true}))
	assert.Equal(t, "TRUNCATE ONLY public.empty;\nCOPY public.empty  FROM stdin WITH (FREEZE);\n\\.\n"+long+
		"COPY public.other (a) FROM stdin;\n1\n\\.\n", out.String(), "a table without columns is frozen too; a statement longer than the buffer goes through")
}

// A dump's SQL that would make psql run a meta-command (a shell command with \!) is refused
// before psql reads it; backslashes in literals, identifiers, comments and data are not commands.
func TestFreezeCopiesRefusesMetaCommands(t *testing.T) {
	for _, line := range []string{
		"\\! touch /tmp/owned\n",
		"SELECT 1; \\! touch /tmp/owned\n",
		"SELECT pg_catalog.setval('public.s', 1, true); \\o /tmp/owned\n",
	} {
		err := freezeCopies(strings.NewReader("SET x = 1;\n"+line), &bytes.Buffer{}, nil)
		assert.ErrorContains(t, err, "psql meta-command", "%q", line)
	}
	fine := "\\restrict abc123\n" +
		"SELECT pg_catalog.setval('public.\"a\\b\"', 1, true);\n" +
		"-- Data for Name: a\\b; Type: TABLE DATA\n" +
		"COPY public.t (a) FROM stdin;\n\\\\N\n\\! not a command: data\n\\.\n" +
		"\\unrestrict abc123\n"
	var out bytes.Buffer
	require.NoError(t, freezeCopies(strings.NewReader(fine), &out, nil))
	assert.Equal(t, fine, out.String())
}
