package jsbackend

import (
	"flag"
	"os"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/relay-energy/relay/internal/natstest"
)

// suite is the three-server JetStream cluster the package's tests share;
// they keep their state in the default state stream, with three replicas.
// Under -short no cluster runs and the tests skip, as the store suite's run
// on JetStream does.
var suite struct {
	cluster *natstest.Cluster
	nc      *nats.Conn
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(natstest.RunMain(m, 3, func(c *natstest.Cluster, nc *nats.Conn) {
		suite.cluster, suite.nc = c, nc
	}))
}

// needsCluster skips a test under -short, where no cluster runs.
func needsCluster(t *testing.T) {
	t.Helper()
	if suite.nc == nil {
		t.Skip("-short: the tests of the JetStream backend need a cluster of three servers")
	}
}
