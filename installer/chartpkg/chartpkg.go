// Package chartpkg packages the chart for publishing: polyaxon-<version>.tgz through the Helm
// SDK's package action, linted (Helm's lint rules, on the archive as shipped) and, when a key
// is given, signed with a provenance file (<archive>.prov) as `helm package --sign` does.
package chartpkg

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"
)

// Options of Package.
type Options struct {
	// ChartDir is the chart's source directory.
	ChartDir string
	// Dest is where the archive goes (created when missing).
	Dest string
	// Version and AppVersion, when set, replace Chart.yaml's (e.g. for a release build).
	Version, AppVersion string
	// Sign adds a provenance file. Keyring is an OpenPGP secret keyring (gpg
	// --export-secret-keys); Key names the key in it (a user id or part of one).
	Sign    bool
	Keyring string
	Key     string
	// PassphraseFile holds the key's passphrase when it has one ("-" reads stdin).
	PassphraseFile string
}

// Result is what Package wrote.
type Result struct {
	// Archive is the path of polyaxon-<version>.tgz.
	Archive string
	// Provenance is Archive + ".prov" when signed.
	Provenance string
	// Lint are the linter's messages below error severity (information and warnings).
	Lint []support.Message
}

// Package writes the chart archive, lints it and signs it. A lint error removes the archive:
// nothing that fails Helm's lint is left to be pushed.
func Package(o Options) (*Result, error) {
	if o.Sign && (o.Keyring == "" || o.Key == "") {
		return nil, errors.New("signing needs a keyring and a key name (fix: KEYRING=path/to/secring.gpg KEY='name <email>')")
	}
	if err := os.MkdirAll(o.Dest, 0o755); err != nil {
		return nil, fmt.Errorf("package: %w", err)
	}
	p := action.NewPackage()
	p.Destination = o.Dest
	p.Version, p.AppVersion = o.Version, o.AppVersion
	archive, err := p.Run(o.ChartDir, nil)
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", o.ChartDir, err)
	}
	res := &Result{Archive: archive}

	lint := action.NewLint().Run([]string{archive}, nil)
	var problems []string
	for _, m := range lint.Messages {
		if m.Severity >= support.ErrorSev {
			problems = append(problems, m.Error())
		} else {
			res.Lint = append(res.Lint, m)
		}
	}
	for _, err := range lint.Errors {
		if !containsErr(lint.Messages, err) {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		_ = os.Remove(archive)
		return nil, fmt.Errorf("lint %s: %s (the archive was removed)", archive, strings.Join(problems, "; "))
	}

	if o.Sign {
		p.Keyring, p.Key, p.PassphraseFile = o.Keyring, o.Key, o.PassphraseFile
		if err := p.Clearsign(archive); err != nil {
			return nil, fmt.Errorf("sign %s with key %q of %s: %w", archive, o.Key, o.Keyring, err)
		}
		res.Provenance = archive + ".prov"
	}
	return res, nil
}

func containsErr(msgs []support.Message, err error) bool {
	for _, m := range msgs {
		if m.Err == err {
			return true
		}
	}
	return false
}
