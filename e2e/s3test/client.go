package s3test

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Client is an S3 client of the store signing as the account access/secret: path-style
// addressing (buckets are not host names on 127.0.0.1), static credentials, the store's region.
func (s *Store) Client(access, secret string) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Region:       s.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(access, secret, ""),
	})
}

// RootClient is Client with the root account's keys.
func (s *Store) RootClient() *s3.Client { return s.Client(s.RootAccessKey, s.RootSecretKey) }

// Env is the environment that points a child process's AWS SDK (Go's config.LoadDefaultConfig,
// botocore, the aws CLI) at the store as the account access/secret. AWS_REGION and
// AWS_DEFAULT_REGION are both set: SDKs differ in which one they read.
func (s *Store) Env(access, secret string) []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + access,
		"AWS_SECRET_ACCESS_KEY=" + secret,
		"AWS_ENDPOINT_URL=" + s.Endpoint,
		"AWS_REGION=" + s.Region,
		"AWS_DEFAULT_REGION=" + s.Region,
	}
}
