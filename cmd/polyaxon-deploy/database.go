package main

// How backup, restore and the backup before an upgrade reach the release's database, and
// where backups go.

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/bucket"
)

// Flag names of backup and restore. The backup directory is --dir, not
// --output: -o/--output is the result format of every command.
const (
	flagBackupDir   = "dir"
	flagLocal       = "local"
	flagPGHost      = "pg-host"
	flagPGPort      = "pg-port"
	flagPGUser      = "pg-user"
	flagPGDatabase  = "pg-database"
	flagPGBinDir    = "pg-bin-dir"
	flagClientImage = "client-image"
	flagCodec       = "codec"
	flagLevel       = "level"
	flagNoVerify    = "no-verify"
	flagFull        = "full"
	flagYes         = "yes"
	flagForce       = "force"
	flagNoScale     = "no-scale"
	flagJobs        = "jobs"
	flagStreams     = "streams"
	flagEncryptTo   = "encrypt-to"
	flagIdentity    = "identity"
	flagNoEncrypt   = "no-encrypt"
)

// identityFlag reads a sealed backup (backup --encrypt-to).
func identityFlag() cli.Flag {
	return &cli.StringFlag{Name: flagIdentity, Usage: "the age private key file (age-keygen's) that opens a backup taken with --encrypt-to", Category: "Backup"}
}

func backupDirFlag() cli.Flag {
	return &cli.StringFlag{Name: flagBackupDir, Aliases: []string{"backup-dir"}, Value: backup.DefaultDir(), EnvVars: []string{backup.DirEnv},
		Usage: "directory holding the backups (one sub-directory per backup), or a bucket: s3://BUCKET/PREFIX", Category: "Backup"}
}

// dbAccessFlags choose how the database is reached (shared by backup and restore).
func dbAccessFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: flagLocal, Usage: "run pg_dump/pg_restore on this machine instead of in the cluster (the password is read from the release's Secret, or $PGPASSWORD)", Category: "Database"},
		&cli.StringFlag{Name: flagPGHost, Usage: "with --local: database host (default: the external host, or 127.0.0.1 for the in-cluster database behind a port-forward)", Category: "Database"},
		&cli.IntFlag{Name: flagPGPort, Usage: "with --local: database port (default 5432 or the external port)", Category: "Database"},
		&cli.StringFlag{Name: flagPGUser, Usage: "with --local: database user (default: from the release's values)", Category: "Database"},
		&cli.StringFlag{Name: flagPGDatabase, Usage: "with --local: database name (default: from the release's values)", Category: "Database"},
		&cli.StringFlag{Name: flagPGBinDir, Usage: "directory of the local PostgreSQL client programs (default: $PATH)", Category: "Database"},
		&cli.StringFlag{Name: flagClientImage, Usage: "image of the short-lived client pod used for an external database (default postgres:<postgresql.image.tag>)", Category: "Database"},
	}
}

// databaseOf says how this command reaches the release's database: --local and the pg flags,
// --dir and --pg-bin-dir (backup, restore and the backup before an upgrade).
func databaseOf(c *cli.Context) (action.Database, error) {
	ks := kubeSettings(c)
	d := action.Database{
		Clients: ks, Namespace: ks.Namespace, Release: c.String(flagRelease),
		Access: backup.TargetOptions{
			Local: c.Bool(flagLocal),
			LocalConn: backup.Conn{
				Host: c.String(flagPGHost), Port: c.Int(flagPGPort), User: c.String(flagPGUser), Database: c.String(flagPGDatabase),
				Password: os.Getenv("PGPASSWORD"),
			},
			LocalBinDir: c.String(flagPGBinDir),
			ClientImage: c.String(flagClientImage),
		},
		Dir: c.String(flagBackupDir), ToolsDir: c.String(flagPGBinDir),
	}
	if !d.Access.Local && (c.IsSet(flagPGHost) || c.IsSet(flagPGPort) || c.IsSet(flagPGUser) || c.IsSet(flagPGDatabase)) {
		return d, usageErrorf("--%s/--%s/--%s/--%s need --%s", flagPGHost, flagPGPort, flagPGUser, flagPGDatabase, flagLocal)
	}
	return d, nil
}

// localBackupDir refuses a bucket as the directory of the backup a command takes before it
// changes anything: a failed upgrade restores from it, on this machine, at once.
func localBackupDir(c *cli.Context, command string) error {
	if dir := c.String(flagBackupDir); bucket.IsLocation(dir) {
		return usageErrorf("--%s %s: the backup %s takes first stays in a directory here, where a failed %s restores from at once: give a directory, and keep a copy in the bucket with 'polyaxon-deploy backup --dir %s'",
			flagBackupDir, dir, command, command, dir)
	}
	return nil
}
