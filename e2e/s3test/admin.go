package s3test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Roles of versitygw's accounts: an admin reaches everything and may use the admin API; a user
// reaches only the buckets it owns (or is granted by ACL or bucket policy) and cannot create
// buckets; a userplus is a user that may create buckets.
const (
	RoleAdmin    = "admin"
	RoleUser     = "user"
	RoleUserPlus = "userplus"
)

// CreateUser adds an account of role user to versitygw's internal IAM: it reaches only the
// buckets it owns (CreateBucket with its access key) or is granted.
func (s *Store) CreateUser(ctx context.Context, access, secret string) error {
	return s.CreateAccount(ctx, access, secret, RoleUser)
}

// CreateAccount adds an account of the given role (RoleAdmin, RoleUser, RoleUserPlus) to
// versitygw's internal IAM.
func (s *Store) CreateAccount(ctx context.Context, access, secret, role string) error {
	// The admin API reads versitygw's auth.Account as XML: field names as elements.
	body, err := xml.Marshal(struct {
		XMLName xml.Name `xml:"Account"`
		Access  string
		Secret  string
		Role    string
	}{Access: access, Secret: secret, Role: role})
	if err != nil {
		return err
	}
	if err := s.admin(ctx, "/create-user", body, nil); err != nil {
		return fmt.Errorf("creating account %s (role %s): %w", access, role, err)
	}
	return nil
}

// CreateBucket creates a bucket owned by the account ownerAccess ("" for the root account):
// only the owner (and admins) reach it unless an ACL or a bucket policy says otherwise.
func (s *Store) CreateBucket(ctx context.Context, bucket, ownerAccess string) error {
	if ownerAccess == "" {
		ownerAccess = s.RootAccessKey
	}
	err := s.admin(ctx, "/"+url.PathEscape(bucket)+"/create", nil, map[string]string{"x-vgw-owner": ownerAccess})
	if err != nil {
		return fmt.Errorf("creating bucket %s owned by %s: %w", bucket, ownerAccess, err)
	}
	return nil
}

// AdminError is an error answer of versitygw's admin API.
type AdminError struct {
	Status  int
	Code    string
	Message string
}

func (e *AdminError) Error() string {
	return fmt.Sprintf("versitygw admin API: %d %s: %s", e.Status, e.Code, e.Message)
}

// admin sends a PATCH to versitygw's admin API, signed (SigV4, service s3) by the root account
// as versitygw's own `admin` command signs it.
func (s *Store) admin(ctx context.Context, path string, body []byte, header map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, s.AdminEndpoint+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	creds := aws.Credentials{AccessKeyID: s.RootAccessKey, SecretAccessKey: s.RootSecretKey}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, payload, "s3", s.Region, time.Now()); err != nil {
		return fmt.Errorf("signing the request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode < 300 {
		return nil
	}
	e := &AdminError{Status: resp.StatusCode}
	var parsed struct{ Code, Message string }
	if xml.Unmarshal(answer, &parsed) == nil && parsed.Code != "" {
		e.Code, e.Message = parsed.Code, parsed.Message
	} else {
		e.Message = strings.TrimSpace(string(answer))
	}
	return e
}
