package dex

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// User is an account of Dex's password database: it logs in with its e-mail address.
type User struct {
	Email, Password string
}

// Options configure the one OAuth2 client Dex knows and the accounts it lets log in.
type Options struct {
	ClientID, ClientSecret string
	// RedirectURIs are the client's callbacks (the edge's http://host:port/oauth2/callback).
	RedirectURIs []string
	Users        []User
}

// Dex is an OpenID Connect provider running on this machine (build-dex.sh): the issuer the
// edge discovers, whose login form a browser fills in and whose keys sign the ID tokens the
// edge checks.
type Dex struct {
	// Issuer is http://127.0.0.1:<port>/dex: a loopback issuer, which the chart accepts over
	// plain http.
	Issuer  string
	LogPath string

	opts Options
	proc *local.HostProcess
}

// Start runs Dex for the cluster on a free loopback port, with its memory storage, the
// client and the accounts of opts, no consent screen, and its password connector also
// answering the token endpoint's password grant (PasswordGrant). It returns once the issuer's
// discovery document answers. The process lives until Stop or the cluster's deletion.
func Start(ctx context.Context, c *cluster.Cluster, bin string, opts Options) (*Dex, error) {
	podsDir := local.PodsDir(c)
	if podsDir == "" {
		return nil, fmt.Errorf("cluster %s: Dex runs beside the local provider only", c.Name)
	}
	ports, err := local.ReservePorts(1)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	d := &Dex{Issuer: "http://" + addr + "/dex", opts: opts}

	var passwords []map[string]string
	for i, u := range opts.Users {
		// Dex refuses a hash of a cost below bcrypt's default.
		hash, err := bcrypt.GenerateFromPassword([]byte(u.Password), bcrypt.DefaultCost)
		if err != nil {
			return nil, err
		}
		passwords = append(passwords, map[string]string{
			"email": u.Email, "username": u.Email, "hash": string(hash),
			"userID": fmt.Sprintf("00000000-0000-0000-0000-%012d", i+1),
		})
	}
	config, err := yaml.Marshal(map[string]any{
		"issuer":  d.Issuer,
		"storage": map[string]any{"type": "memory"},
		"web":     map[string]any{"http": addr},
		"logger":  map[string]any{"level": "info"},
		"oauth2": map[string]any{
			"skipApprovalScreen": true,
			"passwordConnector":  "local",
		},
		"staticClients": []map[string]any{{
			"id": opts.ClientID, "name": "Polyaxon", "secret": opts.ClientSecret, "redirectURIs": opts.RedirectURIs,
		}},
		"enablePasswordDB": true,
		"staticPasswords":  passwords,
	})
	if err != nil {
		return nil, err
	}
	// Under the pods' directory (local.PodsDir): a cluster's deletion kills what runs there.
	dir := filepath.Join(podsDir, "dex")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		return nil, err
	}
	d.LogPath = filepath.Join(dir, "dex.log")
	d.proc = &local.HostProcess{Path: bin, Args: []string{"serve", configPath}, Env: os.Environ(), Dir: dir, LogPath: d.LogPath}
	if err := d.proc.Start(); err != nil {
		return nil, err
	}
	if err := d.waitServing(ctx); err != nil {
		d.Stop()
		return nil, fmt.Errorf("%w (Dex's log: %s)\n%s", err, d.LogPath, cluster.LogTail(d.LogPath, 20))
	}
	return d, nil
}

func (d *Dex) waitServing(ctx context.Context) error {
	discovery := d.Issuer + "/.well-known/openid-configuration"
	last := "not started"
	err := wait.PollUntilContextCancel(ctx, 300*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case <-d.proc.Done():
			return false, fmt.Errorf("dex exited with code %d", d.proc.ExitCode())
		default:
		}
		resp, err := http.Get(discovery)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("Dex's discovery document %s: %s", discovery, last)
	}
	return err
}

// Stop ends Dex.
func (d *Dex) Stop() { d.proc.Stop(5 * time.Second) }

// PasswordGrant asks Dex's token endpoint for the tokens of an account (the resource owner
// password grant, as its password connector allows) and returns the ID token: a JWT of the
// issuer for the client, what a CLI sends as `Authorization: Bearer`.
func (d *Dex) PasswordGrant(ctx context.Context, email, password string) (string, error) {
	conf := &oauth2.Config{
		ClientID: d.opts.ClientID, ClientSecret: d.opts.ClientSecret,
		Endpoint: oauth2.Endpoint{TokenURL: d.Issuer + "/token", AuthStyle: oauth2.AuthStyleInHeader},
		Scopes:   []string{"openid", "email", "profile"},
	}
	tok, err := conf.PasswordCredentialsToken(ctx, email, password)
	if err != nil {
		return "", fmt.Errorf("Dex's password grant for %s: %w", email, err)
	}
	id, _ := tok.Extra("id_token").(string)
	if id == "" {
		return "", fmt.Errorf("Dex's password grant for %s returned no ID token", email)
	}
	return id, nil
}

// EnsureBuild builds Dex, the OpenID Connect provider of the edge's e2e, from the Go module
// proxy (e2e/scripts/build-dex.sh, cached) and returns the binary's path.
func EnsureBuild(ctx context.Context, progress io.Writer) (string, error) {
	p, err := cluster.RunBuildScript(ctx, "build-dex.sh", 1, progress)
	if err != nil {
		return "", err
	}
	return p[0], nil
}
