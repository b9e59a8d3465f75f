package natsconn_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/relay-energy/relay/internal/natsconn"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/testwait"
)

func TestConnectNATSWithEveryAuthMethod(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	tlsFiles := notifytest.NewTLSFiles(t)
	for _, tc := range []struct {
		name   string
		server natstest.Config
		opts   natsconn.Options
	}{
		{"token", natstest.Config{Token: "s3cr3t-token"}, natsconn.Options{Token: "s3cr3t-token"}},
		{"user and password", natstest.Config{User: "relay", Password: "pa55word"}, natsconn.Options{User: "relay", Password: "pa55word"}},
		{"nkey seed inline", natstest.Config{NKey: pub}, natsconn.Options{NKeySeed: string(seed)}},
		{"nkey seed file", natstest.Config{NKey: pub}, natsconn.Options{NKeySeed: seedFile}},
		{"tls with client certificate", natstest.Config{TLS: tlsFiles.Server}, natsconn.Options{CA: tlsFiles.CA, Cert: tlsFiles.Cert, Key: tlsFiles.Key}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.StartServer(t, tc.server)
			o := tc.opts
			o.URL = srv.URL()
			o.Logger = slog.New(slog.DiscardHandler)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			nc, err := natsconn.Connect(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if !nc.IsConnected() {
				t.Fatalf("not connected (last error: %v)", nc.LastError())
			}
			if err := nc.FlushTimeout(time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestConnectNATSWaitsForALateServer(t *testing.T) {
	srv := natstest.StartServer(t, natstest.Config{})
	url := srv.URL()
	srv.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	nc, err := natsconn.Connect(ctx, natsconn.Options{URL: url, ReconnectWait: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("connect to a server that is down: %v; want a connection that keeps trying", err)
	}
	defer nc.Close()
	if nc.IsConnected() {
		t.Fatal("connected to a server that is down")
	}
	srv.Restart()
	testwait.For(t, 5*time.Second, "the connection", nc.IsConnected)
}

func TestConnectNATSRejectsOptionsThatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts natsconn.Options
		want string
	}{
		{"no URL", natsconn.Options{}, "no server URL"},
		{"two methods", natsconn.Options{URL: "nats://127.0.0.1:1", Token: "t", User: "u", Password: "p"}, "only one of"},
		{"user without password", natsconn.Options{URL: "nats://127.0.0.1:1", User: "u"}, "set together"},
		{"cert without key", natsconn.Options{URL: "nats://127.0.0.1:1", Cert: "c.pem"}, "set together"},
		{"bad inline seed", natsconn.Options{URL: "nats://127.0.0.1:1", NKeySeed: "SUNOTAVALIDSEED"}, "not a valid user seed"},
		{"missing seed file", natsconn.Options{URL: "nats://127.0.0.1:1", NKeySeed: "/nonexistent/user.nk"}, "/nonexistent/user.nk"},
		{"account seed pasted in", natsconn.Options{URL: "nats://127.0.0.1:1", NKeySeed: "SAAI2ASECRETACCOUNTSEED"}, "neither a user seed"},
		{"seed file pasted in", natsconn.Options{URL: "nats://127.0.0.1:1", NKeySeed: "-----BEGIN USER NKEY SEED-----\nSUSECRET\n"}, "neither a user seed"},
		{"missing creds file", natsconn.Options{URL: "nats://127.0.0.1:1", Creds: "/nonexistent/user.creds"}, "/nonexistent/user.creds"},
		{"missing CA file", natsconn.Options{URL: "nats://127.0.0.1:1", CA: "/nonexistent/ca.pem"}, "/nonexistent/ca.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := natsconn.Connect(context.Background(), tc.opts)
			if err == nil {
				nc.Close()
				t.Fatalf("connected; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("error %q echoes the seed", err)
			}
		})
	}
}
