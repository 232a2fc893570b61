package adopt

import (
	"context"
	"errors"
	"fmt"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// bitnamiScript runs "$0" "$@" (the tool and its flags) inside a Bitnami PostgreSQL container
// with the connection taken from the container's own environment, as the Bitnami chart sets
// it: POSTGRES_USER (a custom user; none means postgres), POSTGRES_PASSWORD or
// POSTGRES_PASSWORD_FILE (that user's password), POSTGRES_DATABASE, POSTGRESQL_PORT_NUMBER;
// the image also reads the POSTGRESQL_* spellings. The password goes from there into
// PGPASSWORD and never onto a command line. Bitnami's psql is built for another socket
// directory than the server's, so the tools connect over TCP to the container itself unless
// PGHOST says otherwise.
const bitnamiScript = `if [ -z "${POSTGRES_PASSWORD:-}" ] && [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then POSTGRES_PASSWORD=$(cat "$POSTGRES_PASSWORD_FILE"); fi
u="${POSTGRES_USER:-${POSTGRESQL_USERNAME:-postgres}}"
p="${POSTGRES_PASSWORD:-${POSTGRESQL_PASSWORD:-}}"
PGPASSWORD="$p"; PGHOST="${PGHOST:-127.0.0.1}"; PGPORT="${PGPORT:-${POSTGRESQL_PORT_NUMBER:-5432}}"
export PGPASSWORD PGHOST PGPORT
exec "$0" -U "$u" -d "${POSTGRES_DATABASE:-${POSTGRESQL_DATABASE:-$u}}" "$@"`

// BitnamiCommand is the command a BitnamiTarget execs for tool and args.
func BitnamiCommand(tool string, args []string) []string {
	if !backup.NeedsConnection(tool, args) {
		return append([]string{tool}, args...)
	}
	return append([]string{"sh", "-c", bitnamiScript, tool}, args...)
}

// BitnamiTarget runs the PostgreSQL client programs in the Postgres container of the official
// chart (Bitnami's image): a backup.Target, so backups taken through it have the same format,
// manifest and verification as `polyaxon-deploy backup`.
type BitnamiTarget struct {
	Execer    backup.Execer
	Namespace string
	Pod       string
	Container string
}

var _ backup.Target = (*BitnamiTarget)(nil)

func (t *BitnamiTarget) Kind() string { return backup.SourceInCluster }

func (t *BitnamiTarget) String() string {
	return fmt.Sprintf("pod %s/%s container %s (Bitnami PostgreSQL)", t.Namespace, t.Pod, t.Container)
}

func (t *BitnamiTarget) Run(ctx context.Context, tool string, args []string, stdio backup.Stdio) error {
	err := t.Execer.Exec(ctx, t.Namespace, t.Pod, t.Container, BitnamiCommand(tool, args), stdio)
	if err == nil {
		return nil
	}
	var ec backup.ExitCoder
	if errors.As(err, &ec) {
		return fmt.Errorf("%s exited with code %d in %s", tool, ec.ExitStatus(), t)
	}
	return fmt.Errorf("%s in %s: %w", tool, t, err)
}
