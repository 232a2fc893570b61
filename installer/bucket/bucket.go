// Package bucket keeps backups in an S3-compatible bucket: each backup's files, as a backup
// directory holds them, under s3://BUCKET/PREFIX/<backup name>/, the manifest written last so
// that a backup whose upload stopped is never taken for a finished one.
//
// Credentials, region and endpoint are the AWS SDK's (environment, shared config, web
// identity, instance role); a custom endpoint (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3) is
// addressed path-style, as S3-compatible stores expect.
package bucket

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// Scheme starts a bucket location.
const Scheme = "s3://"

// DefaultRegion is used when nothing names one: S3-compatible stores ignore it; a bucket of
// AWS's in another region answers with a redirect the SDK does not follow, said as such.
const DefaultRegion = "us-east-1"

// IsLocation says whether s names a bucket (s3://...) rather than a directory.
func IsLocation(s string) bool { return strings.HasPrefix(s, Scheme) }

// Location is a bucket and a key prefix (without slashes at either end; "" is the bucket's
// top).
type Location struct {
	Bucket, Prefix string
}

func (l Location) String() string {
	if l.Prefix == "" {
		return Scheme + l.Bucket
	}
	return Scheme + l.Bucket + "/" + l.Prefix
}

// Join is the location of name under l.
func (l Location) Join(name string) Location {
	if l.Prefix == "" {
		return Location{Bucket: l.Bucket, Prefix: name}
	}
	return Location{Bucket: l.Bucket, Prefix: l.Prefix + "/" + name}
}

// Split is l's parent and its last element (a backup's location: where the backups are, and
// its name).
func (l Location) Split() (Location, string) {
	dir, name := path.Split(l.Prefix)
	return Location{Bucket: l.Bucket, Prefix: strings.TrimSuffix(dir, "/")}, name
}

// key is the object key of file under l.
func (l Location) key(file string) string {
	if l.Prefix == "" {
		return file
	}
	return l.Prefix + "/" + file
}

// S3's rule for new bucket names: 3 to 63 lower-case letters, digits, dots and hyphens, a letter
// or digit at each end.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// ParseLocation reads s3://BUCKET[/PREFIX]. A prefix with empty, "." or ".." elements is
// refused: keys are joined with "/", and such a prefix would not name what it seems to.
func ParseLocation(s string) (Location, error) {
	if !IsLocation(s) {
		return Location{}, fmt.Errorf("%q is not a bucket location: give s3://BUCKET/PREFIX", s)
	}
	u, err := url.Parse(s)
	if err != nil || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "" {
		return Location{}, fmt.Errorf("%q: give s3://BUCKET/PREFIX (no user, port, query or fragment)", s)
	}
	if !bucketName.MatchString(u.Host) {
		return Location{}, fmt.Errorf("%q: bucket name %q is not one S3 accepts (3 to 63 lower-case letters, digits, '.' and '-')", s, u.Host)
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		for _, el := range strings.Split(prefix, "/") {
			if el == "" || el == "." || el == ".." {
				return Location{}, fmt.Errorf("%q: the prefix has an empty, '.' or '..' element: give s3://BUCKET/a/b", s)
			}
		}
	}
	return Location{Bucket: u.Host, Prefix: prefix}, nil
}

// Store reaches one bucket.
type Store struct {
	client   *s3.Client
	transfer *transfermanager.Client
	endpoint string
}

// Option configures Open.
type Option func(*settings)

type settings struct {
	endpoint, region, access, secret string
	// only: the settings come from this map alone (a pod's environment), never from the
	// process's environment or ~/.aws.
	only map[string]string
}

// WithEndpoint addresses an S3-compatible store at url (path-style) instead of AWS or the
// endpoint the environment names.
func WithEndpoint(url string) Option { return func(s *settings) { s.endpoint = url } }

// WithRegion sets the region instead of the environment's.
func WithRegion(r string) Option { return func(s *settings) { s.region = r } }

// WithStaticCredentials uses these keys instead of the SDK's credential chain.
func WithStaticCredentials(access, secret string) Option {
	return func(s *settings) { s.access, s.secret = access, secret }
}

// WithEnvironmentOnly reads the AWS_* settings from env alone, as a pod given exactly these
// variables would (the keys of a Secret), and nothing from this process's environment or
// ~/.aws: what is checked here is what the pod will run.
func WithEnvironmentOnly(env map[string]string) Option { return func(s *settings) { s.only = env } }

// Open makes a client of the store; nothing is sent until a call.
func Open(ctx context.Context, opts ...Option) (*Store, error) {
	var st settings
	for _, o := range opts {
		o(&st)
	}
	var cfg aws.Config
	if st.only != nil {
		cfg = configOf(st.only)
	} else {
		loads := []func(*config.LoadOptions) error{config.WithDefaultRegion(DefaultRegion)}
		if st.region != "" {
			loads = append(loads, config.WithRegion(st.region))
		}
		if st.access != "" {
			loads = append(loads, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(st.access, st.secret, "")))
		}
		var err error
		if cfg, err = config.LoadDefaultConfig(ctx, loads...); err != nil {
			return nil, fmt.Errorf("reading the S3 client's configuration (AWS_* variables, ~/.aws): %w", err)
		}
	}
	s := &Store{}
	s.client = s3.NewFromConfig(cfg, func(o *s3.Options) {
		// A ranged download's parts carry no checksum to check: the SDK would log that for every
		// part on stderr. Each file is checked against the manifest's sha256 instead.
		o.DisableLogOutputChecksumValidationSkipped = true
		if st.endpoint != "" {
			o.BaseEndpoint = aws.String(st.endpoint)
		}
		if o.BaseEndpoint != nil {
			// A store of our own (an S3-compatible one) is one host: buckets are paths on it.
			o.UsePathStyle = true
			s.endpoint = *o.BaseEndpoint
		}
	})
	// The transfer manager has a checksum setting of its own: it follows the client's
	// (AWS_REQUEST_CHECKSUM_CALCULATION=when_required for stores that refuse CRC32 headers).
	s.transfer = transfermanager.New(s.client, func(o *transfermanager.Options) {
		if cfg.RequestChecksumCalculation != 0 {
			o.RequestChecksumCalculation = cfg.RequestChecksumCalculation
		}
	})
	return s, nil
}

// configOf is the SDK's configuration from a pod's AWS_* variables alone.
func configOf(env map[string]string) aws.Config {
	cfg := aws.Config{Region: cmp.Or(env["AWS_REGION"], env["AWS_DEFAULT_REGION"], DefaultRegion)}
	if env["AWS_ACCESS_KEY_ID"] != "" {
		cfg.Credentials = credentials.NewStaticCredentialsProvider(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_SESSION_TOKEN"])
	}
	if u := cmp.Or(env["AWS_ENDPOINT_URL_S3"], env["AWS_ENDPOINT_URL"]); u != "" {
		cfg.BaseEndpoint = aws.String(u)
	}
	if strings.EqualFold(env["AWS_REQUEST_CHECKSUM_CALCULATION"], "when_required") {
		cfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	}
	return cfg
}

// where names the store for messages: its endpoint when it is not AWS.
func (s *Store) where(l Location) string {
	if s.endpoint != "" {
		return l.String() + " (at " + s.endpoint + ")"
	}
	return l.String()
}

// explain turns the store's refusals into what to fix.
func (s *Store) explain(l Location, err error) error {
	switch refusal(err) {
	case "bucket":
		return fmt.Errorf("%s: bucket %q does not exist: create it, or give another bucket: %w", s.where(l), l.Bucket, err)
	case "keys":
		var ae smithy.APIError
		errors.As(err, &ae)
		return fmt.Errorf("%s: the store refused the credentials (%s): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the profile or role in use): %w", s.where(l), ae.ErrorCode(), err)
	case "access":
		return fmt.Errorf("%s: access denied: the credentials in use may not read and write this bucket and prefix: %w", s.where(l), err)
	case "region":
		return fmt.Errorf("%s: the bucket is in another region than the one in use: set AWS_REGION to the bucket's: %w", s.where(l), err)
	}
	if strings.Contains(err.Error(), "failed to retrieve credentials") || strings.Contains(err.Error(), "no EC2 IMDS role found") {
		return fmt.Errorf("%s: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or a workload identity): %w", s.where(l), err)
	}
	return fmt.Errorf("%s: %w", s.where(l), err)
}

// IsRefusal says whether err is the store's definite answer about the bucket or the keys (the
// bucket is not there, the keys are refused, access is denied), rather than a store that did
// not answer.
func IsRefusal(err error) bool { return refusal(err) != "" }

// refusal classifies the store's answer: "bucket", "keys", "access", or "" for anything else.
func refusal(err error) string {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return ""
	}
	switch ae.ErrorCode() {
	case "NoSuchBucket", "NotFound":
		return "bucket"
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken":
		return "keys"
	case "AccessDenied", "Forbidden", "AllAccessDisabled":
		return "access"
	case "PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException":
		return "region"
	}
	return ""
}
