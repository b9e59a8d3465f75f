package mqtt

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// Type is the MQTT sink type.
var Type = sinktype.Type{
	Name: "mqtt",
	Doc:  "publishes the event bytes to an MQTT 5 broker, one topic per event, QoS 1 by default; optionally the ongoing alarms as retained messages",
	Options: []sinktype.Option{
		{Key: "url", Doc: "the broker: mqtt://host:1883, or mqtts://host:8883 for TLS (required)"},
		{Key: "topic", Doc: "topic template with {tenant} {station} {system} {device} {level} {levelName} {transition} {code} {alarm} (default " + DefaultTopic + ")"},
		{Key: "qos", Doc: "0 (at most once) or 1 (default: an event is delivered when the broker acknowledged it)"},
		{Key: "retain_state", Doc: "keep each ongoing alarm as a retained message on state_topic, its start there and its end clearing it, so that a late subscriber reads the ongoing alarms (default false)"},
		{Key: "state_topic", Doc: "topic template of an alarm's retained state (default " + DefaultStateTopic + "); needs retain_state"},
		{Key: "client_id", Doc: "the client identifier, the same at every connection so that the broker keeps the session (default relay-<sink name>, relay-<tenant>-<sink name> with a tenants file)"},
		{Key: "ca_file", Doc: "PEM file of the authorities trusted for the broker's certificate instead of the system's"},
		{Key: "username_env", Doc: "variable holding the user name"},
		{Key: "password_env", Doc: "variable holding the password (with username_env)"},
		{Key: "timeout", Doc: "bound of one publish and its acknowledgement (default 10s)"},
	},
	Decode:   decode,
	Machines: true,
}

type options struct {
	url                      *url.URL
	topic, stateTopic        *Topic
	qos                      byte
	retainState              bool
	clientID                 string
	caFile                   string
	roots                    *x509.CertPool
	usernameEnv, passwordEnv string
	username, password       string
	timeout                  time.Duration
}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := &options{retainState: d.Bool("retain_state"), clientID: d.String("client_id"), timeout: d.Duration("timeout", 10*time.Second)}
	if d.Missing("url", "an mqtt sink needs url, the broker's mqtt://host:1883 or mqtts://host:8883") {
		raw := d.String("url")
		u, err := url.Parse(raw)
		switch {
		case err != nil || u.Host == "":
			d.Errorf("url", "want mqtt://host:port or mqtts://host:port")
		case u.Scheme != "mqtt" && u.Scheme != "mqtts":
			d.Errorf("url", "scheme %q: want mqtt (in clear) or mqtts (TLS)", u.Scheme)
		case u.User != nil:
			d.Errorf("url", "credentials in the URL: put them in username_env and password_env")
		case (u.Path != "" && u.Path != "/") || u.RawQuery != "":
			d.Errorf("url", "want mqtt://host:port or mqtts://host:port, without a path or query")
		default:
			if u.Port() == "" {
				u.Host += map[string]string{"mqtt": ":1883", "mqtts": ":8883"}[u.Scheme]
			}
			o.url = u
		}
	}
	o.topic = topicOf(d, "topic", DefaultTopic)
	o.stateTopic = topicOf(d, "state_topic", DefaultStateTopic)
	if d.Has("state_topic") && !o.retainState {
		d.Errorf("state_topic", "state_topic is for retain_state: set retain_state: true, or leave state_topic out")
	}
	switch q := d.String("qos"); q {
	case "", "1":
		o.qos = 1
	case "0":
		o.qos = 0
	default:
		d.Errorf("qos", "%q: want 0 (at most once) or 1 (acknowledged by the broker)", q)
	}
	if o.clientID != "" && (len(o.clientID) > 65535 || strings.ContainsAny(o.clientID, "\x00")) {
		d.Errorf("client_id", "want a client identifier of UTF-8 text without NUL")
	}
	if path := d.String("ca_file"); path != "" {
		o.caFile = path
		pem, err := os.ReadFile(path)
		o.roots = x509.NewCertPool()
		switch {
		case err != nil:
			d.Errorf("ca_file", "cannot read %s: %v", path, err)
		case !o.roots.AppendCertsFromPEM(pem):
			d.Errorf("ca_file", "%s holds no PEM certificate", path)
		case o.url != nil && o.url.Scheme != "mqtts":
			d.Errorf("ca_file", "ca_file is for TLS: use an mqtts:// url, or leave ca_file out")
		}
	}
	o.usernameEnv, o.username = d.Env("username_env")
	o.passwordEnv, o.password = d.Env("password_env")
	if d.Has("password_env") && !d.Has("username_env") {
		d.Errorf("username_env", "missing: password_env is set, so the broker needs username_env too")
	}
	return o
}

func topicOf(d *sinktype.Decoder, key, def string) *Topic {
	text := def
	if d.Has(key) {
		text = d.String(key)
	}
	t, err := CompileTopic(text)
	if err != nil {
		d.Errorf(key, "%v", err)
		return nil
	}
	return t
}

func (o *options) Target() string {
	out := o.Host(sinktype.Env{}) + " topic " + o.topic.Text()
	if o.retainState {
		out += ", state " + o.stateTopic.Text()
	}
	return out
}

func (o *options) Host(sinktype.Env) string {
	if o.url == nil {
		return "(invalid URL)"
	}
	return o.url.Scheme + "://" + o.url.Host
}

func (o *options) Summary() []string {
	out := []string{"qos " + strconv.Itoa(int(o.qos))}
	if o.retainState {
		out = append(out, "retain_state")
	}
	if o.caFile != "" {
		out = append(out, "ca_file: "+o.caFile)
	}
	if o.usernameEnv != "" {
		out = append(out, "username_env "+o.usernameEnv+", password_env "+o.passwordEnv+" (set)")
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
		// Two tenants' sinks of one name, served by two replicas, would
		// take one client id's session from each other.
		id = "relay-" + tenant + "-" + name
	default:
		id = "relay-" + name
	}
	return Config{Name: name, Tenant: tenant, URL: o.url, Topic: o.topic, StateTopic: o.stateTopic, QoS: o.qos, RetainState: o.retainState,
		ClientID: id, RootCAs: o.roots, Username: o.username, Password: o.password, Timeout: o.timeout}
}

func (o *options) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	c := o.config(name, deps.Tenant)
	c.Logger, c.Fence = deps.Logger, deps.Fence
	return New(c)
}

// Probe connects to the broker as the sink's client id with "-check" (an
// ACL that allows the sink's id by a pattern allows it; the sink's own
// session is left alone), which accepts the credentials or says why not,
// and whether it takes the sink's QoS and retained messages, and
// disconnects.
func (o *options) Probe(ctx context.Context, deps sinktype.Deps) (string, error) {
	name := deps.Sink
	if name == "" {
		name = "probe"
	}
	c := o.config(name, deps.Tenant)
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
	out := []sinktype.Request{{What: fmt.Sprintf("PUBLISH %s (qos %d)", topic, o.qos), Body: body}}
	if o.retainState && ev.Data.Transition.Valid() {
		state, err := o.stateTopic.Render(ev)
		if err != nil {
			return nil, err
		}
		if ev.Data.Transition == event.Start {
			out = append(out, sinktype.Request{What: fmt.Sprintf("PUBLISH %s (qos %d, retained)", state, o.qos), Body: body})
		} else {
			out = append(out, sinktype.Request{What: fmt.Sprintf("PUBLISH %s (qos %d, retained, empty: clears the start)", state, o.qos)})
		}
	}
	return out, nil
}
