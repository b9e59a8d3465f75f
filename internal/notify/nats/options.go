package nats

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

var streamRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)

// Type is the NATS sink type.
var Type = sinktype.Type{
	Name: "nats",
	Doc:  "publishes the event bytes to a subject per event, on core NATS or JetStream (needs RELAY_NATS_URL)",
	Options: []sinktype.Option{
		{Key: "subject", Doc: "Go template of the subject (default " + DefaultSubject + ")"},
		{Key: "jetstream", Doc: "publish with JetStream and wait for the stream's ack (default false: core NATS with a flush)"},
		{Key: "create_stream", Doc: "name of a stream to create when no stream captures the subject (needs jetstream: true)"},
	},
	Decode:   decode,
	Machines: true,
}

type options struct {
	subject      *Subject
	jetStream    bool
	createStream string
}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := &options{jetStream: d.Bool("jetstream")}
	text := DefaultSubject
	if d.Has("subject") {
		if text = d.String("subject"); text == "" {
			return nil // already reported
		}
	}
	subj, err := CompileSubject(text)
	if err != nil {
		d.Errorf("subject", "bad template: %v", err)
		return nil
	}
	o.subject = subj
	if name := d.String("create_stream"); name != "" {
		if !streamRE.MatchString(name) {
			d.Errorf("create_stream", "%q is not a stream name: want letters, digits, _ or -", name)
		}
		first, _, _ := strings.Cut(text, ".")
		switch {
		case !o.jetStream:
			d.Errorf("create_stream", "needs jetstream: true")
		case first == "" || strings.Contains(first, "{{"):
			d.Errorf("create_stream", "needs a subject that starts with a literal token, such as energy., so that the stream captures only these subjects")
		}
		o.createStream = name
	}
	return o
}

func (o *options) Target() string { return o.subject.Text() }

// Host lists the servers of RELAY_NATS_URL, without their credentials.
func (o *options) Host(env sinktype.Env) string {
	var hosts []string
	for _, u := range strings.Split(env.NATSURL, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		if !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		hosts = append(hosts, sinktype.RedactURL(u, false))
	}
	return strings.Join(hosts, ", ")
}

func (o *options) Summary() []string {
	out := []string{"core NATS"}
	if o.jetStream {
		out = []string{"jetstream"}
	}
	if o.createStream != "" {
		out = append(out, "create_stream: "+o.createStream)
	}
	return out
}

func (o *options) AddSecrets(*redact.Set) {}

func (o *options) Destination() string { return "" }

// Needs names the connection every NATS sink shares.
func (o *options) Needs() []string { return []string{"RELAY_NATS_URL"} }

func (o *options) Build(ctx context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	if deps.NATS == nil {
		return nil, fmt.Errorf("no NATS connection: set RELAY_NATS_URL")
	}
	nc, err := deps.NATS(ctx)
	if err != nil {
		return nil, err
	}
	return New(nc, Config{Name: name, Subject: o.subject.Render, SubjectText: o.subject.Text(),
		JetStream: o.jetStream, CreateStream: o.createStream, Logger: deps.Logger})
}

// Probe connects and, for a JetStream sink, looks up the stream that
// captures the subject of a sample event.
func (o *options) Probe(ctx context.Context, deps sinktype.Deps) (string, error) {
	if deps.NATS == nil {
		return "", fmt.Errorf("no NATS connection: set RELAY_NATS_URL")
	}
	nc, err := deps.NATS(ctx)
	if err != nil {
		return "", err
	}
	sample := event.Samples()[0]
	subject, err := o.subject.Render(&sample)
	if err != nil {
		return "", err
	}
	if !o.jetStream {
		return fmt.Sprintf("connected to %s (core NATS)", nc.ConnectedUrlRedacted()), nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return "", fmt.Errorf("jetstream: %w", err)
	}
	stream, err := js.StreamNameBySubject(ctx, subject)
	switch {
	case err == nil:
		return fmt.Sprintf("connected; stream %s captures %s", stream, subject), nil
	case o.createStream != "":
		return fmt.Sprintf("connected; no stream captures %s yet, relay will create %s", subject, o.createStream), nil
	}
	return "", fmt.Errorf("jetstream: no stream captures subject %s (%v): create one, or set create_stream", subject, err)
}

func (o *options) Render(ev *event.Event) ([]sinktype.Request, error) {
	subject, err := o.subject.Render(ev)
	if err != nil {
		return nil, err
	}
	body, err := ev.Marshal()
	if err != nil {
		return nil, err
	}
	// The headers are always Nats-Msg-Id (the event id), Relay-Type and
	// Relay-Level.
	return []sinktype.Request{{What: "PUBLISH " + subject, Body: body}}, nil
}
