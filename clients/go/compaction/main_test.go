package compaction_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
	"github.com/compaction-sidecar/compaction-sidecar/clients/go/internal/testserver"
)

// sidecar is the real server the tests of this package share; each test
// uses session ids of its own.
var sidecar *testserver.Server

func TestMain(m *testing.M) {
	server, err := testserver.Start("", "--summarizer", "extractive")
	if err != nil {
		fmt.Fprintln(os.Stderr, "start compaction-sidecar:", err)
		os.Exit(1)
	}
	sidecar = server
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

// dial connects to the shared server; the client is closed with the test.
func dial(t *testing.T, opts ...compaction.Option) *compaction.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := compaction.Dial(ctx, sidecar.Addr, opts...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// dialSmallLimit starts a server of the test's own with an 8 KiB message
// limit, so that a window of a few KB comes from GetContext without its
// content, and connects to it; both end with the test.
func dialSmallLimit(t *testing.T) (*compaction.Client, *testserver.Server) {
	t.Helper()
	server, err := testserver.Start("", "--max-message-bytes", "8192")
	if err != nil {
		t.Fatalf("start compaction-sidecar: %v", err)
	}
	t.Cleanup(server.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := compaction.Dial(ctx, server.Addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client, server
}

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustPolicy(t *testing.T, s string) *pb.CompactionPolicy {
	t.Helper()
	p, err := compaction.PolicyFromJSON(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var idCounter atomic.Int64

// uniqueID makes a session id from base that no other test, nor another
// run of the same test (go test -count=N shares one server), uses.
func uniqueID(base string) string {
	return fmt.Sprintf("%s-%d-%d", base, os.Getpid(), idCounter.Add(1))
}
