package compaction

import (
	"context"
	"crypto/tls"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// DefaultTimeout bounds a unary call whose context has no deadline of its
// own, retries and backoffs included.
const DefaultTimeout = 30 * time.Second

// Option configures a Client.
type Option func(*config)

type config struct {
	token       string
	tls         *tls.Config
	timeout     time.Duration
	retry       RetryPolicy
	dialOptions []grpc.DialOption
}

func newConfig(opts []Option) config {
	cfg := config{timeout: DefaultTimeout, retry: DefaultRetryPolicy}
	for _, opt := range opts {
		opt(&cfg)
	}
	return cfg
}

// WithToken sends "authorization: Bearer <token>" on every call, for a
// server started with --auth-token-file. It is sent over plaintext too: a
// sidecar is usually reached over localhost without TLS.
func WithToken(token string) Option {
	return func(c *config) { c.token = token }
}

// WithTLS connects over TLS. A nil RootCAs means the system's roots; set
// Certificates for a server that requires client certificates (mutual TLS).
// Without this option the connection is plaintext.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		c.tls = cfg
	}
}

// WithTimeout sets the deadline given to a unary call whose context has
// none (default DefaultTimeout); 0 means no deadline.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// WithRetryPolicy sets how calls that are safe to repeat are retried on
// codes.Unavailable; NoRetry turns retries off.
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *config) { c.retry = p }
}

// WithDialOptions passes extra options to grpc.NewClient (interceptors,
// message size limits, a custom dialer). They come after the client's own,
// so they win.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOptions = append(c.dialOptions, opts...) }
}

// bearerToken is per-RPC credentials that do not require TLS.
type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (bearerToken) RequireTransportSecurity() bool { return false }

var _ credentials.PerRPCCredentials = bearerToken("")
