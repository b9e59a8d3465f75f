package jsbackend

import (
	"flag"
	"fmt"
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
	code := func() int {
		if testing.Short() {
			return m.Run()
		}
		main := &natstest.Main{}
		defer main.Close()
		suite.cluster = natstest.StartCluster(main, 3)
		nc, err := nats.Connect(suite.cluster.URL(), nats.MaxReconnects(-1))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer nc.Close()
		suite.nc = nc
		return m.Run()
	}()
	os.Exit(code)
}

// needsCluster skips a test under -short, where no cluster runs.
func needsCluster(t *testing.T) {
	t.Helper()
	if suite.nc == nil {
		t.Skip("-short: the tests of the JetStream backend need a cluster of three servers")
	}
}
