// Command native_echo is bench.echo's baseline written in Go: a gRPC server
// echoing raw bytes, no proto, no store. It serves the same methods
// (bench.Echo/Stream echoes every message, bench.Echo/Unary its request) on
// 127.0.0.1 and a free port, prints its address on stdout, and serves until
// its stdin closes, as `python -m bench.echo` does, so bench.deployed can run
// either. It measures what grpc-go costs where grpc.aio costs the echo's
// figures (bench.native_front).
//
// With -forward PATH it is instead the front end a native design would put
// before the Python engine: every message is handed over a Unix socket to a
// Python process (bench.native_front's backend) and the reply it sends back
// is the one answered, so the hand-off's cost is measured with the front.
// Frames both ways are a 4-byte big-endian length, an 8-byte id, the
// message; the writer coalesces what is waiting into one socket write.
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// raw passes message bytes through untouched, as bench.echo's handlers do
// (no serializer on either side).
type raw struct{}

func (raw) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }

func (raw) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}

func (raw) Name() string { return "proto" }

// backend is the Unix-socket connection to the Python process, shared by
// every call: requests go out through one writer goroutine, replies are
// routed back to their caller by id.
type backend struct {
	out     chan frame
	next    atomic.Uint64
	waiting sync.Map // id -> chan []byte
}

type frame struct {
	id      uint64
	message []byte
}

func dial(path string) (*backend, error) {
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	b := &backend{out: make(chan frame, 1024)}
	go b.write(conn)
	go b.read(conn)
	return b, nil
}

func (b *backend) write(conn net.Conn) {
	w := bufio.NewWriterSize(conn, 256<<10)
	var head [12]byte
	for f := range b.out {
		for {
			binary.BigEndian.PutUint32(head[:4], uint32(len(f.message)))
			binary.BigEndian.PutUint64(head[4:], f.id)
			_, _ = w.Write(head[:])
			_, _ = w.Write(f.message)
			select {
			case f = <-b.out:
				continue
			default:
			}
			break
		}
		if err := w.Flush(); err != nil {
			log.Fatalf("native_echo: backend write: %v", err)
		}
	}
}

func (b *backend) read(conn net.Conn) {
	r := bufio.NewReaderSize(conn, 256<<10)
	var head [12]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			log.Fatalf("native_echo: backend read: %v", err)
		}
		message := make([]byte, binary.BigEndian.Uint32(head[:4]))
		if _, err := io.ReadFull(r, message); err != nil {
			log.Fatalf("native_echo: backend read: %v", err)
		}
		if reply, ok := b.waiting.LoadAndDelete(binary.BigEndian.Uint64(head[4:])); ok {
			reply.(chan []byte) <- message
		}
	}
}

// call hands message to the backend and returns its reply.
func (b *backend) call(message []byte) []byte {
	id := b.next.Add(1)
	reply := make(chan []byte, 1)
	b.waiting.Store(id, reply)
	b.out <- frame{id, message}
	return <-reply
}

var forwardTo *backend

// answer is a message's reply: itself, or the backend's.
func answer(message []byte) []byte {
	if forwardTo == nil {
		return message
	}
	return forwardTo.call(message)
}

// streamReplies answers a stream's messages in order, each through the
// backend, while more are read: up to 16 in flight, as the load keeps.
func streamReplies(stream grpc.ServerStream) error {
	pending := make(chan chan []byte, 16)
	failed := make(chan error, 1)
	go func() {
		defer close(pending)
		for {
			var message []byte
			if err := stream.RecvMsg(&message); err == io.EOF {
				return
			} else if err != nil {
				failed <- err
				return
			}
			reply := make(chan []byte, 1)
			pending <- reply
			go func() { reply <- answer(message) }()
		}
	}()
	for reply := range pending {
		message := <-reply
		if err := stream.SendMsg(&message); err != nil {
			return err
		}
	}
	select {
	case err := <-failed:
		return err
	default:
		return nil
	}
}

func echo(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	switch method {
	case "/bench.Echo/Stream":
		if forwardTo != nil {
			return streamReplies(stream)
		}
		for {
			var message []byte
			if err := stream.RecvMsg(&message); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			if err := stream.SendMsg(&message); err != nil {
				return err
			}
		}
	case "/bench.Echo/Unary":
		var message []byte
		if err := stream.RecvMsg(&message); err != nil {
			return err
		}
		reply := answer(message)
		return stream.SendMsg(&reply)
	}
	return status.Errorf(codes.Unimplemented, "no method %s", method)
}

func main() {
	forward := flag.String("forward", "", "a Unix socket to hand every message to")
	flag.Parse()
	if *forward != "" {
		b, err := dial(*forward)
		if err != nil {
			log.Fatalf("native_echo: -forward: %v", err)
		}
		forwardTo = b
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatalf("native_echo: listen: %v", err)
	}
	server := grpc.NewServer(
		grpc.ForceServerCodec(raw{}),
		grpc.UnknownServiceHandler(echo),
		grpc.MaxRecvMsgSize(16<<20),
		grpc.MaxSendMsgSize(16<<20),
	)
	fmt.Println(listener.Addr().String())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		server.Stop()
	}()
	if err := server.Serve(listener); err != nil {
		log.Fatalf("native_echo: serve: %v", err)
	}
}
