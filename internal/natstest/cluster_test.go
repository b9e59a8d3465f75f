package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A KV bucket replicated on three servers keeps answering, with the values
// written before, while one of them is down, and after it came back.
func TestR3BucketSurvivesOneServerDown(t *testing.T) {
	c := StartCluster(t, 3)
	js, err := jetstream.New(c.Connect())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "t", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	// The first server, whose address every client has first, then the
	// last: a restarted server rejoins.
	for _, i := range []int{0, c.Size() - 1} {
		c.Stop(i)
		var e jetstream.KeyValueEntry
		for {
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			e, err = kv.Get(actx, "k")
			acancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("server %d down: %v", i, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if string(e.Value()) != "v1" {
			t.Fatalf("server %d down: k = %q, want v1", i, e.Value())
		}
		c.Restart(i)
		c.WaitReady(3)
	}
}
