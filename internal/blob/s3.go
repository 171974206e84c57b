package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/encrypt"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// S3Options says where an S3 bucket is and how to reach it.
type S3Options struct {
	// Endpoint is the store's host:port, without a scheme.
	Endpoint string
	Bucket   string
	// Prefix is prepended to every key. OpenS3 adds a final slash if it is
	// missing.
	Prefix string
	// Region is the bucket's region; empty asks the store.
	Region string
	// The credentials. When all three are empty they come from the
	// environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
	// AWS_SESSION_TOKEN.
	AccessKey, SecretKey, SessionToken string
	// TLS selects https.
	TLS bool
	// CAFile is a PEM file of the roots to trust instead of the system's.
	// It needs TLS.
	CAFile string
	// SSE selects server-side encryption of new objects: "" for none (or
	// the bucket's default), "s3" for keys the store manages (SSE-S3), "c"
	// for SSECKey (SSE-C).
	SSE string
	// SSECKey is the 32-byte key for SSE "c", sent with every PUT and GET.
	// SSE-C needs TLS, since the key travels with each request.
	SSECKey []byte
}

// S3 is a Bucket on an S3-compatible object store, through minio-go with
// its default retries, except for PUTs, which PutIfAbsent retries itself.
//
// PutIfAbsent is one PUT with If-None-Match: *, never a multipart upload,
// so objects are at most the store's single-PUT limit (5 GiB on AWS). A PUT
// retried after its response was lost fails with ErrExist, as the contract
// allows.
type S3 struct {
	client    *minio.Client
	putter    *minio.Client // client's twin without retries: see PutIfAbsent
	transport *http.Transport
	bucket    string
	prefix    string
	secure    bool               // HTTPS
	put       encrypt.ServerSide // for PUT; nil for none
	get       encrypt.ServerSide // for GET and HEAD: only SSE-C needs it
}

// OpenS3 checks o, connects to the store and checks that the bucket exists
// and that the credentials are accepted.
func OpenS3(ctx context.Context, o S3Options) (*S3, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	s := &S3{bucket: o.Bucket, prefix: o.Prefix, secure: o.TLS}
	var err error
	switch o.SSE {
	case "s3":
		s.put = encrypt.NewSSE()
	case "c":
		if s.put, err = encrypt.NewSSEC(o.SSECKey); err != nil {
			return nil, fmt.Errorf("blob: s3: SSECKey: %w", err)
		}
		s.get = s.put
	}
	mo, from, err := o.minioOptions()
	if err != nil {
		return nil, err
	}
	s.transport = mo.Transport.(*http.Transport)
	if s.client, err = minio.New(o.Endpoint, &mo); err != nil {
		return nil, fmt.Errorf("blob: s3: Endpoint %q: %w", o.Endpoint, err)
	}
	mo.MaxRetries = 1 // one attempt per call
	if s.putter, err = minio.New(o.Endpoint, &mo); err != nil {
		return nil, fmt.Errorf("blob: s3: Endpoint %q: %w", o.Endpoint, err)
	}
	ok, err := s.client.BucketExists(ctx, o.Bucket)
	if err != nil {
		s.transport.CloseIdleConnections()
		switch minio.ToErrorResponse(err).Code {
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken":
			return nil, fmt.Errorf("blob: s3: %s refused the credentials from %s for bucket %q: %w", o.Endpoint, from, o.Bucket, err)
		}
		return nil, fmt.Errorf("blob: s3: check bucket %q at %s: %w", o.Bucket, o.Endpoint, err)
	}
	if !ok {
		s.transport.CloseIdleConnections()
		return nil, fmt.Errorf("blob: s3: bucket %q does not exist at %s", o.Bucket, o.Endpoint)
	}
	return s, nil
}

// NewS3Client returns a minio-go client of the store o names, reached as
// OpenS3 reaches it (TLS, CA roots, region, credentials), without checking
// the bucket: for a program that measures the store itself, such as tern
// doctor. o.SSE is not applied.
func NewS3Client(o S3Options) (*minio.Client, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	mo, _, err := o.minioOptions()
	if err != nil {
		return nil, err
	}
	c, err := minio.New(o.Endpoint, &mo)
	if err != nil {
		return nil, fmt.Errorf("blob: s3: Endpoint %q: %w", o.Endpoint, err)
	}
	return c, nil
}

// minioOptions are the options of a client of the store o names, with a
// transport of its own, and where its credentials come from.
func (o *S3Options) minioOptions() (minio.Options, string, error) {
	transport, err := minio.DefaultTransport(o.TLS)
	if err != nil {
		return minio.Options{}, "", fmt.Errorf("blob: s3: %w", err)
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return minio.Options{}, "", fmt.Errorf("blob: s3: CAFile: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return minio.Options{}, "", fmt.Errorf("blob: s3: CAFile %s holds no PEM certificate", o.CAFile)
		}
		transport.TLSClientConfig.RootCAs = roots
	}
	creds, from := o.credentials()
	return minio.Options{Creds: creds, Secure: o.TLS, Region: o.Region, Transport: transport}, from, nil
}

// normalize checks o and adds the slash to its prefix.
func (o *S3Options) normalize() error {
	switch {
	case o.Endpoint == "":
		return errors.New("blob: s3: Endpoint is empty; give the store's host:port")
	case strings.Contains(o.Endpoint, "://") || strings.Contains(o.Endpoint, "/"):
		return fmt.Errorf("blob: s3: Endpoint %q is not a host:port (choose https with TLS, not a scheme)", o.Endpoint)
	case o.Bucket == "":
		return errors.New("blob: s3: Bucket is empty")
	}
	if err := s3utils.CheckValidBucketName(o.Bucket); err != nil {
		return fmt.Errorf("blob: s3: Bucket %q: %w", o.Bucket, err)
	}
	if o.Prefix != "" && !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	if o.Prefix != "" {
		if why := keyProblem(strings.TrimSuffix(o.Prefix, "/")); why != "" {
			return fmt.Errorf("blob: s3: Prefix %q %s", o.Prefix, why)
		}
	}
	if (o.AccessKey == "") != (o.SecretKey == "") {
		return errors.New("blob: s3: give AccessKey and SecretKey together, or neither to use the environment's")
	}
	if o.SessionToken != "" && o.AccessKey == "" {
		return errors.New("blob: s3: SessionToken needs AccessKey and SecretKey")
	}
	if o.CAFile != "" && !o.TLS {
		return errors.New("blob: s3: CAFile needs TLS")
	}
	switch o.SSE {
	case "", "s3":
		if len(o.SSECKey) > 0 {
			return fmt.Errorf("blob: s3: SSECKey is set but SSE is %q, not \"c\"", o.SSE)
		}
	case "c":
		if len(o.SSECKey) != 32 {
			return fmt.Errorf("blob: s3: SSE \"c\" needs a 32-byte SSECKey, not %d bytes", len(o.SSECKey))
		}
		if !o.TLS {
			return errors.New("blob: s3: SSE \"c\" needs TLS: the key travels with every request, and stores refuse it over plain http")
		}
	default:
		return fmt.Errorf("blob: s3: SSE %q is not \"\", \"s3\" or \"c\"", o.SSE)
	}
	return nil
}

// credentials returns the credentials o selects and says where they are
// from.
func (o *S3Options) credentials() (*credentials.Credentials, string) {
	if o.AccessKey == "" {
		return credentials.NewEnvAWS(), "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)"
	}
	return credentials.NewStaticV4(o.AccessKey, o.SecretKey, o.SessionToken), "the options (AccessKey " + o.AccessKey + ")"
}

// putAttempts bounds the attempts of one PutIfAbsent, as minio-go's
// MaxRetry bounds those of its other calls.
const putAttempts = 10

// PutIfAbsent retries, with backoff, a PUT that failed on the network or
// with a server error (5xx, 429), and one that the store refuses with 409
// ConditionalRequestConflict: AWS does when another conditional PUT of the
// key is in flight, and asks to retry, since that PUT may still fail. A
// retry that finds the object stored ends with 412, ErrExist.
//
// It retries with a new reader over the data each time, instead of letting
// minio-go seek its one reader back to the start: net/http may still be
// sending a failed attempt's body from its own goroutine when the next
// attempt starts (golang/go#51907), and would then read the new attempt's
// bytes from under it.
func (s *S3) PutIfAbsent(ctx context.Context, key string, data ...[]byte) error {
	if err := check(ctx, key); err != nil {
		return err
	}
	var size int64
	for _, part := range data {
		size += int64(len(part))
	}
	// On plain HTTP the payload's SHA-256 goes in the signed headers, so
	// the store refuses a body changed on its way, as with minio-go's
	// default streaming signature, but in one signature instead of one per
	// chunk of an aws-chunked body, each of which the store checks: a
	// quarter less of the client's CPU for a small PUT. On HTTPS, which
	// protects the body, no payload is signed ("UNSIGNED-PAYLOAD"), as
	// minio-go does there.
	var sum string
	if !s.secure {
		h := sha256.New()
		for _, part := range data {
			h.Write(part)
		}
		sum = hex.EncodeToString(h.Sum(nil))
	}
	opts := minio.PutObjectOptions{ServerSideEncryption: s.put, DisableMultipart: true, DisableContentSha256: true}
	opts.SetMatchETagExcept("*")
	put := minio.Core{Client: s.putter}
	backoff := 10 * time.Millisecond
	for attempt := 1; ; attempt++ {
		body := io.NewSectionReader(parts(data), 0, size)
		_, err := put.PutObject(ctx, s.bucket, s.prefix+key, body, size, "", sum, opts)
		if err == nil {
			return nil
		}
		r := minio.ToErrorResponse(err)
		switch {
		case r.StatusCode == http.StatusPreconditionFailed || r.Code == "PreconditionFailed":
			return fmt.Errorf("%w: %s", ErrExist, key)
		case attempt < putAttempts && ctx.Err() == nil && (r.Code == "ConditionalRequestConflict" || retryablePut(err, r)):
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("blob: s3 put %s: %w", key, ctx.Err())
			case <-t.C:
			}
			backoff = min(2*backoff, time.Second)
		default:
			return fmt.Errorf("blob: s3 put %s: %w", key, err)
		}
	}
}

// retryablePut reports whether a PUT that failed with err (r, its S3
// error) may succeed if tried again, by the rules minio-go retries its
// other calls by: the store answered that it was busy or broken (5xx,
// 429), or the request failed on its way for any reason but a TLS set-up
// that will fail again.
func retryablePut(err error, r minio.ErrorResponse) bool {
	if r.StatusCode != 0 || r.Code != "" {
		return r.StatusCode >= 500 || r.StatusCode == http.StatusTooManyRequests
	}
	var unknownCA x509.UnknownAuthorityError
	return !errors.As(err, &unknownCA) && !strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// Get returns the whole object; the caller owns the result.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	if err := check(ctx, key); err != nil {
		return nil, err
	}
	body, info, _, err := s.core().GetObject(ctx, s.bucket, s.prefix+key, s.getOptions())
	if err != nil {
		return nil, s.readErr("get", key, err)
	}
	defer body.Close()
	buf := bytes.NewBuffer(make([]byte, 0, max(info.Size, 0)+bytes.MinRead))
	if _, err := buf.ReadFrom(body); err != nil {
		return nil, s.readErr("get", key, err)
	}
	return buf.Bytes(), nil
}

func (s *S3) GetRange(ctx context.Context, key string, off int64, p []byte) (int, error) {
	if err := check(ctx, key); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("blob: get range of %s: negative offset %d", key, off)
	}
	if len(p) == 0 {
		_, err := s.Stat(ctx, key)
		return 0, err
	}
	opts := s.getOptions()
	if err := opts.SetRange(off, off+int64(len(p))-1); err != nil {
		return 0, fmt.Errorf("blob: s3 get range of %s: %w", key, err)
	}
	body, _, header, err := s.core().GetObject(ctx, s.bucket, s.prefix+key, opts)
	if err != nil {
		if r := minio.ToErrorResponse(err); r.StatusCode == http.StatusRequestedRangeNotSatisfiable || r.Code == "InvalidRange" {
			return 0, io.EOF // the object ends at or before off
		}
		return 0, s.readErr("get range of", key, err)
	}
	defer body.Close()
	if off > 0 && header.Get("Content-Range") == "" {
		// The store sent the whole object, as it may for a range it
		// does not satisfy.
		if _, err := io.CopyN(io.Discard, body, off); err != nil {
			if err == io.EOF {
				return 0, io.EOF
			}
			return 0, s.readErr("get range of", key, err)
		}
	}
	n, err := io.ReadFull(body, p)
	switch err {
	case nil:
		return n, nil
	case io.EOF, io.ErrUnexpectedEOF:
		return n, io.EOF
	}
	return n, s.readErr("get range of", key, err)
}

func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	if err := check(ctx, key); err != nil {
		return Info{}, err
	}
	info, err := s.client.StatObject(ctx, s.bucket, s.prefix+key, s.getOptions())
	if err != nil {
		return Info{}, s.readErr("stat", key, err)
	}
	return Info{Key: key, Size: info.Size}, nil
}

// List skips objects under the prefix whose names are not valid keys, such
// as the "folder/" markers some consoles make.
func (s *S3) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx) // stops the listing if we return early
	defer cancel()
	var infos []Info
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("blob: s3 list %q: %w", prefix, obj.Err)
		}
		key, ok := strings.CutPrefix(obj.Key, s.prefix)
		if !ok || checkKey(key) != nil {
			continue
		}
		infos = append(infos, Info{Key: key, Size: obj.Size})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("blob: s3 list %q: %w", prefix, err)
	}
	sortInfos(infos)
	return infos, nil
}

func (s *S3) Delete(ctx context.Context, key string) error {
	if err := check(ctx, key); err != nil {
		return err
	}
	err := s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("blob: s3 delete %s: %w", key, err)
	}
	return nil
}

// Close closes idle connections.
func (s *S3) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

func (s *S3) core() minio.Core { return minio.Core{Client: s.client} }

func (s *S3) getOptions() minio.GetObjectOptions {
	return minio.GetObjectOptions{ServerSideEncryption: s.get}
}

func (s *S3) readErr(op, key string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return fmt.Errorf("blob: s3 %s %s: %w", op, key, err)
}

// isNotFound reports whether err says the object does not exist. A missing
// bucket is a different error.
func isNotFound(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.Code == "NoSuchKey" || r.StatusCode == http.StatusNotFound && r.Code != "NoSuchBucket"
}

// parts reads the concatenation of its slices, where they are.
type parts [][]byte

func (p parts) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	for _, part := range p {
		if off >= int64(len(part)) {
			off -= int64(len(part))
			continue
		}
		n += copy(b[n:], part[off:])
		off = 0
		if n == len(b) {
			return n, nil
		}
	}
	return n, io.EOF
}
