// Package testserver starts a real compaction-sidecar for the tests: a
// fresh `compaction-sidecar serve` on a free port, over SQLite in a
// temporary directory.
//
// The binary is $SIDECAR_BIN, else the repository's .venv (what `make
// setup` builds), else compaction-sidecar on PATH. There is no fallback
// beyond that: a missing binary fails the tests, it never skips them.
package testserver

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is a running sidecar.
type Server struct {
	// Addr is host:port of the gRPC API.
	Addr string
	// Dir is the temporary directory holding the database (and any files
	// the caller put there before Start, such as a token file).
	Dir string

	ownDir bool
	cmd    *exec.Cmd
	stderr *strings.Builder
	mu     sync.Mutex
	done   chan struct{}
}

var listening = regexp.MustCompile(`listening on .* \(port (\d+)\)`)

// Binary finds the compaction-sidecar executable.
func Binary() (string, error) {
	if bin := os.Getenv("SIDECAR_BIN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("SIDECAR_BIN=%s: %w", bin, err)
		}
		return bin, nil
	}
	_, here, _, _ := runtime.Caller(0)
	venv := filepath.Join(filepath.Dir(here), "..", "..", "..", "..", ".venv", "bin", "compaction-sidecar")
	if _, err := os.Stat(venv); err == nil {
		return filepath.Clean(venv), nil
	}
	if bin, err := exec.LookPath("compaction-sidecar"); err == nil {
		return bin, nil
	}
	return "", errors.New("compaction-sidecar not found: set SIDECAR_BIN (e.g. /tmp/venv/bin/compaction-sidecar) or run `make setup` at the repository root")
}

// Start runs `compaction-sidecar serve` on 127.0.0.1 with a free port
// (the server picks it and prints it) over a fresh SQLite database in dir
// (a new temporary directory when dir is ""), plus args, and returns once
// it listens.
func Start(dir string, args ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if dir != "" {
		return StartAt(bin, dir, "127.0.0.1:0", args...)
	}
	if dir, err = os.MkdirTemp("", "compaction-go-*"); err != nil {
		return nil, err
	}
	s, err := StartAt(bin, dir, "127.0.0.1:0", args...)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.ownDir = true
	return s, nil
}

// StartAt is Start with the binary, the directory and the listen address
// given, e.g. to restart a server on the port and database it had.
func StartAt(bin, dir, listen string, args ...string) (*Server, error) {
	argv := append([]string{
		"serve",
		"--listen", listen,
		"--store", "sqlite:///" + filepath.Join(dir, "sidecar.db"),
		"--log-level", "WARNING",
		"--shutdown-grace-s", "0.5",
	}, args...)
	cmd := exec.Command(bin, argv...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &strings.Builder{}
	s := &Server{Dir: dir, cmd: cmd, stderr: stderr, done: make(chan struct{})}
	cmd.Stderr = lockedWriter{s}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	port := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if m := listening.FindStringSubmatch(scanner.Text()); m != nil {
				select {
				case port <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	select {
	case p := <-port:
		s.Addr = "127.0.0.1:" + p
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("compaction-sidecar exited before listening: %s", s.Stderr())
	case <-time.After(30 * time.Second):
		s.Stop()
		return nil, fmt.Errorf("compaction-sidecar did not listen within 30s: %s", s.Stderr())
	}
}

// Stderr is what the server has written to stderr so far.
func (s *Server) Stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// Stop ends the server (SIGTERM, then SIGKILL after 5s), waits for it,
// and removes the directory Start made for it.
func (s *Server) Stop() {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	if s.ownDir {
		_ = os.RemoveAll(s.Dir)
	}
}

type lockedWriter struct{ s *Server }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.stderr.Write(p)
}
