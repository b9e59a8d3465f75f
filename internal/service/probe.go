package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/natsconn"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/route"
)

// probeTimeout bounds each sink's probe.
const probeTimeout = 10 * time.Second

// ProbeSinks reaches every sink of rules without sending an event, as each
// sink type's probe does (NATS connects and finds the stream, Slack checks
// its token with auth.test, chat webhooks have their host dialled). It writes
// one line per sink to w, naming the sink, its type and the scheme and host
// it reaches (never a token, path or query), and returns one problem per sink
// that could not be reached.
func ProbeSinks(ctx context.Context, w io.Writer, rules *route.Rules, cfg config.Config) []error {
	var problems []error
	conn := &probeNATS{cfg: cfg}
	defer conn.close()
	deps := sinktype.Deps{Env: SinkEnv(cfg), HTTP: &http.Client{}, NATS: conn.get}.Defaults()
	for _, s := range rules.Sinks {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		deps.Sink = s.Name
		line, err := s.Config.Probe(pctx, deps)
		cancel()
		if err != nil {
			problems = append(problems, fmt.Errorf("%s:%d: sink %q: %w", rules.File, s.Line, s.Name, err))
			line = "FAILED"
		}
		fmt.Fprintf(w, "sink %s (%s) at %s: %s\n", s.Name, s.Type, s.Config.Host(deps.Env), line)
	}
	return problems
}

// probeNATS connects once, for the first NATS sink probed, and waits for
// the connection: a probe wants an answer, not a background retry.
type probeNATS struct {
	cfg  config.Config
	mu   sync.Mutex
	nc   *nats.Conn
	err  error
	done bool
}

func (p *probeNATS) get(ctx context.Context) (*nats.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return p.nc, p.err
	}
	p.done = true
	nc, err := natsconn.Connect(ctx, natsOptions(p.cfg, "relay-check", slog.New(slog.DiscardHandler)))
	if err != nil {
		p.err = err
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(probeTimeout)
	}
	if err := nc.FlushTimeout(time.Until(deadline)); err != nil || !nc.IsConnected() {
		nc.Close()
		p.err = fmt.Errorf("nats: no connection to the server of RELAY_NATS_URL within %s", probeTimeout)
		return nil, p.err
	}
	p.nc = nc
	return nc, nil
}

func (p *probeNATS) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nc != nil {
		p.nc.Close()
	}
}

// natsOptions are the connection options the environment describes.
func natsOptions(cfg config.Config, name string, log *slog.Logger) natsconn.Options {
	return natsconn.Options{
		URL: cfg.NATS.URL, Creds: cfg.NATS.Creds, NKeySeed: cfg.NATS.NKeySeed, Token: cfg.NATS.Token,
		User: cfg.NATS.User, Password: cfg.NATS.Password, CA: cfg.NATS.CA, Cert: cfg.NATS.Cert, Key: cfg.NATS.Key,
		Name: name, Logger: log,
	}
}
