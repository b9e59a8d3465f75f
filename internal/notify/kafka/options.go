package kafka

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// Type is the Kafka sink type.
var Type = sinktype.Type{
	Name: "kafka",
	Doc:  "produces the event bytes to a Kafka topic, keyed by the alarm's origin id, with the CloudEvents attributes as ce_ headers; idempotent, acknowledged by every in-sync replica",
	Options: []sinktype.Option{
		{Key: "brokers", Doc: "the seed brokers, host:port each: a list, or one string with commas (required)"},
		{Key: "topic", Doc: "the topic: a name of ASCII letters, digits, '.', '_' and '-', at most 249 characters, where {tenant} stands for the event's tenant id (default " + DefaultTopic + "); never created by relay"},
		{Key: "tls", Doc: "connect over TLS 1.2 or later (default false)"},
		{Key: "ca_file", Doc: "PEM file of the authorities trusted for the brokers' certificates instead of the system's; needs tls"},
		{Key: "sasl", Doc: "SASL mechanism: plain, scram-sha-256 or scram-sha-512 (default none); needs username_env and password_env"},
		{Key: "username_env", Doc: "variable holding the SASL user name"},
		{Key: "password_env", Doc: "variable holding the SASL password"},
		{Key: "client_id", Doc: "the client.id the brokers see in their logs and quotas (default relay-<sink name>, relay-<tenant>-<sink name> with a tenants file)"},
		{Key: "timeout", Doc: "bound of one produce and its acknowledgement (default 10s)"},
	},
	Decode:   decode,
	Machines: true,
}

type options struct {
	brokers                  []string
	topic                    *Topic
	tls                      bool
	caFile                   string
	ca                       []byte
	sasl                     string
	usernameEnv, passwordEnv string
	username, password       string
	clientID                 string
	timeout                  time.Duration
}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := &options{tls: d.Bool("tls"), clientID: d.String("client_id"), timeout: d.Duration("timeout", 10*time.Second)}
	if d.Missing("brokers", "a kafka sink needs brokers, its seed brokers as host:port") {
		for _, item := range d.Strings("brokers") {
			for b := range strings.SplitSeq(item, ",") {
				b = strings.TrimSpace(b)
				if err := validBroker(b); err != nil {
					d.Errorf("brokers", "%q: %v", b, err)
					continue
				}
				o.brokers = append(o.brokers, b)
			}
		}
	}
	text := DefaultTopic
	if d.Has("topic") {
		text = d.String("topic")
	}
	t, err := CompileTopic(text)
	if err != nil {
		d.Errorf("topic", "%v", err)
	}
	o.topic = t
	if path := d.String("ca_file"); path != "" {
		o.caFile = path
		pem, err := os.ReadFile(path)
		switch {
		case err != nil:
			d.Errorf("ca_file", "cannot read %s: %v", path, err)
		case !x509.NewCertPool().AppendCertsFromPEM(pem):
			d.Errorf("ca_file", "%s holds no PEM certificate", path)
		case !o.tls:
			d.Errorf("ca_file", "ca_file is for TLS: set tls: true, or leave ca_file out")
		default:
			o.ca = pem
		}
	}
	o.sasl = d.Enum("sasl", "", SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512)
	o.usernameEnv, o.username = d.Env("username_env")
	o.passwordEnv, o.password = d.Env("password_env")
	switch {
	case d.Has("sasl") && !d.Has("username_env"):
		d.Errorf("username_env", "missing: sasl is set, so the brokers need username_env and password_env")
	case d.Has("sasl") && !d.Has("password_env"):
		d.Errorf("password_env", "missing: sasl is set, so the brokers need username_env and password_env")
	case !d.Has("sasl") && (d.Has("username_env") || d.Has("password_env")):
		d.Errorf("sasl", "missing: credentials are set without a mechanism: set sasl to plain, scram-sha-256 or scram-sha-512")
	}
	if d.Has("client_id") && !validClientID(o.clientID) {
		d.Errorf("client_id", "want a client id of at most 255 printable characters")
	}
	return o
}

// validBroker checks a seed broker, host:port.
func validBroker(b string) error {
	if strings.Contains(b, "://") {
		return fmt.Errorf("want host:port, without a scheme (tls: true connects over TLS)")
	}
	host, port, err := net.SplitHostPort(b)
	if err != nil || host == "" {
		return fmt.Errorf("want host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q: want 1 to 65535", port)
	}
	return nil
}

func validClientID(id string) bool {
	if id == "" || len(id) > 255 {
		return false
	}
	for _, r := range id {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func (o *options) Target() string {
	if o.topic == nil {
		return o.Host(sinktype.Env{})
	}
	return o.Host(sinktype.Env{}) + " topic " + o.topic.Text()
}

// Host returns the seed brokers, kafka:// (kafka+tls:// over TLS) and
// comma-separated.
func (o *options) Host(sinktype.Env) string {
	if len(o.brokers) == 0 {
		return "(no brokers)"
	}
	scheme := "kafka://"
	if o.tls {
		scheme = "kafka+tls://"
	}
	return scheme + strings.Join(o.brokers, ",")
}

func (o *options) Summary() []string {
	out := []string{"acks all, idempotent", "timeout " + o.timeout.String()}
	if o.tls {
		out = append(out, "tls")
	}
	if o.caFile != "" {
		out = append(out, "ca_file: "+o.caFile)
	}
	if o.sasl != "" {
		out = append(out, "sasl "+o.sasl+", username_env "+o.usernameEnv+", password_env "+o.passwordEnv+" (set)")
	}
	if o.clientID != "" {
		out = append(out, "client_id "+o.clientID)
	}
	return out
}

func (o *options) AddSecrets(set *redact.Set) { set.Add(o.password) }

func (o *options) Destination() string { return "" }

func (o *options) config(name, tenant string) Config {
	id := o.clientID
	switch {
	case id != "":
	case tenant != "":
		id = "relay-" + tenant + "-" + name
	default:
		id = "relay-" + name
	}
	return Config{Name: name, Brokers: o.brokers, Topic: o.topic, ClientID: id, TLS: o.tls, CA: o.ca,
		SASL: o.sasl, Username: o.username, Password: o.password, Timeout: o.timeout}
}

func (o *options) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	c := o.config(name, deps.Tenant)
	c.Logger, c.Fence = deps.Logger, deps.Fence
	return New(c)
}

// Probe connects to the brokers, which accept the credentials or say why
// not, and asks for the topic's partitions, without producing anything.
func (o *options) Probe(ctx context.Context, deps sinktype.Deps) (string, error) {
	c := o.config("probe", deps.Tenant)
	c.ClientID += "-check"
	return probe(ctx, c)
}

func (o *options) Render(ev *event.Event) ([]sinktype.Request, error) {
	topic, err := o.topic.Render(ev)
	if err != nil {
		return nil, err
	}
	body, err := ev.Marshal()
	if err != nil {
		return nil, err
	}
	var hs []string
	for _, h := range Headers(ev, "") {
		hs = append(hs, h.Key+": "+string(h.Value))
	}
	what := fmt.Sprintf("PRODUCE %s key %q (acks all, idempotent; headers %s)", topic, ev.Data.OriginID, strings.Join(hs, ", "))
	return []sinktype.Request{{What: what, Body: body}}, nil
}
