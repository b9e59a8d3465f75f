package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/relay-energy/relay/internal/natsconn"
	"log/slog"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streamName and streamSubjects are the JetStream stream every bench event
// lands in; each phase publishes under a subject prefix of its own.
const (
	streamName     = "RELAYBENCH"
	streamSubjects = "bench.>"
)

// natsEnv is an embedded nats-server with JetStream, the client connection
// the relay's sinks publish on, and the stream that captures them.
type natsEnv struct {
	srv *server.Server
	nc  *nats.Conn
}

// startNATS starts an embedded nats-server with JetStream storing in dir,
// connects to it as the relay does, and creates the bench stream (file
// storage, as an operator's stream would be).
func startNATS(ctx context.Context, dir string, log *slog.Logger) (*natsEnv, error) {
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats server: not ready for connections after 10s")
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nc, err := natsconn.Connect(cctx, natsconn.Options{URL: srv.ClientURL(), Name: "relaybench", Logger: log})
	if err != nil {
		srv.Shutdown()
		return nil, fmt.Errorf("nats connect: %w", err)
	}
	env := &natsEnv{srv: srv, nc: nc}
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = js.CreateStream(cctx, jetstream.StreamConfig{
			Name:       streamName,
			Subjects:   []string{streamSubjects},
			Storage:    jetstream.FileStorage,
			Duplicates: 2 * time.Minute,
		})
	}
	if err != nil {
		env.close()
		return nil, fmt.Errorf("nats: creating stream %s on %s: %w", streamName, streamSubjects, err)
	}
	return env, nil
}

// close disconnects and shuts the server down.
func (e *natsEnv) close() {
	e.nc.Close()
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
