package s3test

// Attach is a Store for a versitygw that runs elsewhere (in a test cluster: the s3store
// add-on), reached from here at endpoint (its S3 API) and adminEndpoint (its admin API), with
// its root account's keys: CreateUser, CreateAccount, CreateBucket, Client and Env work as on
// a store of New. It owns no process and no files: Close does nothing, and Dir, DataDir,
// IAMDir, MetaDir and LogFile are empty.
func Attach(endpoint, adminEndpoint, rootAccessKey, rootSecretKey string) *Store {
	return &Store{
		Endpoint:      endpoint,
		AdminEndpoint: adminEndpoint,
		Region:        Region,
		RootAccessKey: rootAccessKey,
		RootSecretKey: rootSecretKey,
		closed:        true,
	}
}
