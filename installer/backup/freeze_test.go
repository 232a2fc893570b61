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
