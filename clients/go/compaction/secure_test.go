package compaction_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
	"github.com/compaction-sidecar/compaction-sidecar/clients/go/internal/testserver"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir and
// returns a pool that trusts it.
func selfSigned(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "compaction-sidecar test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	write(t, filepath.Join(dir, "cert.pem"), certPEM)
	write(t, filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return pool
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTokenTLSAndLimits runs against a server of its own: TLS, a bearer
// token, and at most 2 events per append.
func TestTokenTLSAndLimits(t *testing.T) {
	idSecure1 := uniqueID("go-secure-1")
	dir := t.TempDir()
	roots := selfSigned(t, dir)
	write(t, filepath.Join(dir, "tokens"), []byte("# test token\ns3cret\n"))
	server, err := testserver.Start(dir,
		"--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem"),
		"--auth-token-file", filepath.Join(dir, "tokens"), "--max-events-per-append", "2")
	if err != nil {
		t.Fatal(err)
	}
	defer server.Stop()
	ctx := ctxFor(t)
	trust := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}

	client, err := compaction.Dial(ctx, server.Addr, compaction.WithTLS(trust), compaction.WithToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	chat := client.Session(idSecure1)
	if _, err := chat.Append(ctx, []*pb.Event{compaction.User("hi")}, &compaction.AppendOptions{CreateIfMissing: true}); err != nil {
		t.Fatalf("append over TLS with the token: %v", err)
	}

	// Over the limit: RESOURCE_EXHAUSTED naming it (google.rpc.QuotaFailure).
	_, err = chat.Append(ctx, []*pb.Event{compaction.User("1"), compaction.Assistant("2"), compaction.User("3")}, nil)
	e := asError(t, err)
	if !errors.Is(err, compaction.ErrResourceExhausted) || len(e.Limits) == 0 {
		t.Fatalf("append of 3 events over a limit of 2: %+v", e)
	}

	wrongToken, err := compaction.New(server.Addr, compaction.WithTLS(trust), compaction.WithToken("wrong"))
	if err != nil {
		t.Fatal(err)
	}
	defer wrongToken.Close()
	if _, err := wrongToken.Session(idSecure1).Context(ctx); !errors.Is(err, compaction.ErrUnauthenticated) {
		t.Fatalf("a wrong token: %v", err)
	}
	noToken, err := compaction.New(server.Addr, compaction.WithTLS(trust))
	if err != nil {
		t.Fatal(err)
	}
	defer noToken.Close()
	if _, err := noToken.Session(idSecure1).Context(ctx); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}

	// A client that does not trust the certificate never gets through.
	untrusting, err := compaction.New(server.Addr, compaction.WithTLS(&tls.Config{MinVersion: tls.VersionTLS12}), compaction.WithToken("s3cret"), compaction.WithRetryPolicy(compaction.NoRetry))
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.Close()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := untrusting.Session(idSecure1).Context(short); status.Code(err) != codes.Unavailable {
		t.Fatalf("an untrusted certificate: %v", err)
	}
}
