package pgtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Tables seeded by Seed, parents first.
var Tables = []string{"owners", "projects", "runs", "run_statuses", "artifacts", "metrics"}

// Rows per run, used to size a seed: each run has this many child rows.
const (
	statusesPerRun = 3
	metricsPerRun  = 5
)

const schemaSQL = `
CREATE TABLE IF NOT EXISTS owners (
  id bigint PRIMARY KEY,
  username text NOT NULL UNIQUE,
  email text NOT NULL,
  profile jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS projects (
  id bigint PRIMARY KEY,
  owner_id bigint NOT NULL REFERENCES owners(id),
  name text NOT NULL UNIQUE,
  description text,
  settings jsonb NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
  id bigint PRIMARY KEY,
  uuid uuid NOT NULL UNIQUE,
  project_id bigint NOT NULL REFERENCES projects(id),
  owner_id bigint NOT NULL REFERENCES owners(id),
  name text NOT NULL,
  status text NOT NULL,
  spec jsonb NOT NULL,
  outputs jsonb,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_project_created ON runs (project_id, created_at);
CREATE INDEX IF NOT EXISTS runs_status ON runs (status);
CREATE INDEX IF NOT EXISTS runs_kind ON runs ((spec->>'kind'));
CREATE TABLE IF NOT EXISTS run_statuses (
  id bigint PRIMARY KEY,
  run_id bigint NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  status text NOT NULL,
  message text,
  created_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS run_statuses_run ON run_statuses (run_id);
CREATE TABLE IF NOT EXISTS artifacts (
  id bigint PRIMARY KEY,
  run_id bigint NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  path text NOT NULL,
  kind text NOT NULL,
  content bytea NOT NULL,
  meta jsonb NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS artifacts_run_path ON artifacts (run_id, path);
CREATE TABLE IF NOT EXISTS metrics (
  id bigint PRIMARY KEY,
  run_id bigint NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step integer NOT NULL,
  name text NOT NULL,
  value double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS metrics_run_step ON metrics (run_id, step);
CREATE OR REPLACE VIEW run_summary AS
  SELECT r.id, r.name, r.status, p.name AS project FROM runs r JOIN projects p ON p.id = r.project_id;
`

// Seeding is deterministic (derived from row ids, no random()) so that two
// seeds of the same size have equal checksums.
const batchSQL = `
INSERT INTO owners (id, username, email, profile, created_at)
SELECT i, 'user' || i, 'user' || i || '@example.com',
       jsonb_build_object('theme', CASE WHEN i % 2 = 0 THEN 'dark' ELSE 'light' END, 'org', 'org' || (i % 7)),
       timestamptz '2024-01-01 00:00:00+00' + i * interval '1 hour'
FROM generate_series(1, {{OWNERS}}) i ON CONFLICT DO NOTHING;

INSERT INTO projects (id, owner_id, name, description, settings, created_at)
SELECT i, 1 + (i % {{OWNERS}}), 'project-' || i, 'Project number ' || i || ' for ' || md5(i::text),
       jsonb_build_object('public', i % 3 = 0, 'tags', jsonb_build_array('team' || (i % 5), 'cv', 'nlp'),
                          'connections', jsonb_build_array(jsonb_build_object('name', 'store' || (i % 4), 'kind', 's3'))),
       timestamptz '2024-01-01 00:00:00+00' + i * interval '1 day'
FROM generate_series(1, {{PROJECTS}}) i ON CONFLICT DO NOTHING;

INSERT INTO runs (id, uuid, project_id, owner_id, name, status, spec, outputs, created_at, updated_at)
SELECT i, md5('run' || i)::uuid, 1 + (i % {{PROJECTS}}), 1 + (i % {{OWNERS}}), 'run-' || i,
       (ARRAY['created','scheduled','running','succeeded','failed','stopped'])[1 + i % 6],
       jsonb_build_object(
         'version', 1.1, 'kind', (ARRAY['job','service','dag','tuner'])[1 + i % 4],
         'name', 'experiment-' || (i % 1000),
         'params', jsonb_build_object('lr', (i % 100) / 1000.0, 'batch_size', 16 * (1 + i % 8), 'epochs', 1 + i % 50,
                                      'optimizer', (ARRAY['adam','sgd','rmsprop'])[1 + i % 3]),
         'run', jsonb_build_object('kind', 'job', 'container', jsonb_build_object(
            'image', 'polyaxon/polyaxon-examples:' || (i % 20),
            'command', jsonb_build_array('python', '-u', 'train.py'),
            'args', jsonb_build_array('--lr=' || (i % 100) / 1000.0, '--seed=' || i),
            'resources', jsonb_build_object('limits', jsonb_build_object('cpu', 1 + i % 4, 'memory', (1 + i % 8) || 'Gi'))))),
       CASE WHEN i % 6 = 3 THEN jsonb_build_object('loss', (i % 997) / 997.0, 'accuracy', (i % 991) / 991.0, 'checksum', md5(i::text)) END,
       timestamptz '2024-01-01 00:00:00+00' + i * interval '1 minute',
       timestamptz '2024-01-01 00:00:00+00' + i * interval '1 minute' + (i % 3600) * interval '1 second'
FROM generate_series({{FROM}}, {{TO}}) i;

INSERT INTO run_statuses (id, run_id, status, message, created_at)
SELECT r * {{SPR}} + s, r, (ARRAY['created','running','done'])[1 + s],
       CASE WHEN s = 2 THEN 'Run ' || r || ' finished with exit code ' || (r % 3) ELSE NULL END,
       timestamptz '2024-01-01 00:00:00+00' + r * interval '1 minute' + s * interval '10 second'
FROM generate_series({{FROM}}, {{TO}}) r, generate_series(0, {{SPR}} - 1) s;

INSERT INTO artifacts (id, run_id, path, kind, content, meta)
SELECT i, i, 'outputs/model-' || i || '.bin', (ARRAY['model','metric','log','image'])[1 + i % 4],
       sha512(int8send(i)) || sha256(int8send(-i)) ||
       convert_to(repeat('epoch=' || (i % 50) || ' step=' || (i % 1000) || ' loss=' || round((i % 997) / 997.0, 4) || E'\n', {{REPEAT}}), 'UTF8'),
       jsonb_build_object('size', 96 + 30 * {{REPEAT}}, 'mime', 'application/octet-stream', 'hash', md5(i::text))
FROM generate_series({{FROM}}, {{TO}}) i;

INSERT INTO metrics (id, run_id, step, name, value)
SELECT r * {{MPR}} + s, r, s, (ARRAY['loss','accuracy','precision','recall','f1'])[1 + s], ((r * 31 + s * 17) % 10007) / 10007.0
FROM generate_series({{FROM}}, {{TO}}) r, generate_series(0, {{MPR}} - 1) s;
`

// SeedSpec sizes a seed.
type SeedSpec struct {
	// Runs is the number of rows of the runs table; every run adds 3 statuses,
	// 1 artifact and 5 metrics, so total rows are about 10x Runs.
	Runs int
	// ArtifactRepeat is how many ~30 byte log lines each artifact's bytea holds
	// beyond 96 incompressible bytes (default 20).
	ArtifactRepeat int
	// BatchSize is how many runs one INSERT batch adds (default 50000).
	BatchSize int
	// Progress, when set, is called after each batch.
	Progress func(runsDone int)
}

// RowsFor returns the total rows a seed of runs runs creates (for sizing).
func RowsFor(runs int) int { return runs * (1 + statusesPerRun + 1 + metricsPerRun) }

// Seed creates the schema in db and fills it. Runs are appended after the
// highest existing run id, so Seed can be called again to grow a database.
func Seed(ctx context.Context, s *Server, db string, spec SeedSpec) error {
	if spec.Runs <= 0 {
		return fmt.Errorf("seed: Runs must be > 0")
	}
	if spec.ArtifactRepeat <= 0 {
		spec.ArtifactRepeat = 20
	}
	if spec.BatchSize <= 0 {
		spec.BatchSize = 50000
	}
	if _, err := s.Psql(ctx, db, schemaSQL); err != nil {
		return fmt.Errorf("seed: schema: %w", err)
	}
	out, err := s.Psql(ctx, db, "SELECT coalesce(max(id), 0) FROM runs")
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	start, err := strconv.Atoi(out)
	if err != nil {
		return fmt.Errorf("seed: max run id %q: %w", out, err)
	}
	owners, projects := 50, 200
	for done := 0; done < spec.Runs; {
		n := min(spec.BatchSize, spec.Runs-done)
		from, to := start+done+1, start+done+n
		sql := strings.NewReplacer(
			"{{OWNERS}}", strconv.Itoa(owners), "{{PROJECTS}}", strconv.Itoa(projects),
			"{{FROM}}", strconv.Itoa(from), "{{TO}}", strconv.Itoa(to),
			"{{SPR}}", strconv.Itoa(statusesPerRun), "{{MPR}}", strconv.Itoa(metricsPerRun),
			"{{REPEAT}}", strconv.Itoa(spec.ArtifactRepeat),
		).Replace(batchSQL)
		if _, err := s.Psql(ctx, db, "BEGIN;\n"+sql+"\nCOMMIT;"); err != nil {
			return fmt.Errorf("seed: runs %d..%d: %w", from, to, err)
		}
		done += n
		if spec.Progress != nil {
			spec.Progress(done)
		}
	}
	if _, err := s.Psql(ctx, db, "ANALYZE"); err != nil {
		return fmt.Errorf("seed: analyze: %w", err)
	}
	return nil
}

// Checksums returns, for every table of the public schema, "<rows>:<md5>"
// where md5 covers every row's text form in primary-key order. Equal maps
// mean equal table contents.
func Checksums(ctx context.Context, s *Server, db string) (map[string]string, error) {
	out, err := s.Psql(ctx, db, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("checksums: listing tables: %w", err)
	}
	res := map[string]string{}
	if out == "" {
		return res, nil
	}
	var q strings.Builder
	for _, t := range strings.Split(out, "\n") {
		// md5 of per-row md5s: string_agg of whole rows would exceed 1 GB on big tables.
		fmt.Fprintf(&q, "SELECT '%s', count(*), md5(coalesce(string_agg(md5(t::text), '' ORDER BY t.id), '')) FROM public.%q t;\n", t, t)
	}
	out, err = s.Psql(ctx, db, q.String())
	if err != nil {
		return nil, fmt.Errorf("checksums: %w", err)
	}
	for _, line := range strings.Split(out, "\n") {
		parts := strings.Split(line, "|")
		if len(parts) != 3 {
			return nil, fmt.Errorf("checksums: unexpected psql output %q", line)
		}
		res[parts[0]] = parts[1] + ":" + parts[2]
	}
	return res, nil
}

// DatabaseSize returns pg_database_size(db) in bytes.
func DatabaseSize(ctx context.Context, s *Server, db string) (int64, error) {
	out, err := s.Psql(ctx, db, "SELECT pg_database_size(current_database())")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(out, 10, 64)
}

// SeedTo seeds db until it holds about size bytes and returns how many runs that took: a
// first batch measures what a run costs on disk, the rest is sized from it.
func SeedTo(ctx context.Context, s *Server, db string, size int64) (int, error) {
	const first = 10000
	if err := Seed(ctx, s, db, SeedSpec{Runs: first}); err != nil {
		return 0, err
	}
	empty, err := DatabaseSize(ctx, s, "template1")
	if err != nil {
		return 0, err
	}
	cur, err := DatabaseSize(ctx, s, db)
	if err != nil {
		return 0, err
	}
	perRun := float64(cur-empty) / first
	runs := first
	if rest := int(float64(size-cur) / perRun); rest > 0 {
		if err := Seed(ctx, s, db, SeedSpec{Runs: rest, BatchSize: 100000}); err != nil {
			return 0, err
		}
		runs += rest
	}
	_, err = s.Psql(ctx, db, "VACUUM ANALYZE; CHECKPOINT")
	return runs, err
}

// SchemaObjects lists the indexes, constraints and triggers of db's tables outside the system
// schemas, each as its table, name and definition (constraints with whether they were
// validated), in one order: equal lists mean a restore built every one the source had.
func SchemaObjects(ctx context.Context, s *Server, db string) ([]string, error) {
	out, err := s.Psql(ctx, db, `SELECT * FROM (
  SELECT format('%s.%s index %s: %s', schemaname, tablename, indexname, indexdef) FROM pg_indexes
  WHERE schemaname NOT IN ('pg_catalog', 'information_schema')
  UNION ALL
  SELECT format('%s constraint %s: %s (validated %s)', c.conrelid::regclass, c.conname, pg_get_constraintdef(c.oid), c.convalidated)
  FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
  WHERE c.conrelid <> 0 AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  UNION ALL
  SELECT format('%s trigger %s: %s', tgrelid::regclass, tgname, pg_get_triggerdef(oid)) FROM pg_trigger WHERE NOT tgisinternal
) o(def) ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("schema objects: %w", err)
	}
	if out == "" {
		return nil, nil
	}
	return strings.Split(out, "\n"), nil
}
