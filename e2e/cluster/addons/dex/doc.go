// Package dex runs Dex (e2e/scripts/build-dex.sh) on this machine beside a local cluster: the
// OpenID Connect issuer of the authenticating edge's e2e, whose login form a browser fills in
// and whose password grant gives a CLI its ID token.
package dex
