package slack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/relay-energy/relay/internal/notify"
)

// Socket Mode's timing.
const (
	// ackWithin bounds the wait to queue an envelope's acknowledgement:
	// Slack wants it within 3 s, and one later is of no use.
	ackWithin = 3 * time.Second
	// groupsTTL is how long the user groups read from usergroups.list are
	// used before they are read again.
	groupsTTL = 5 * time.Minute
	// maxActing bounds the clicks handed to Actions at once.
	maxActing = 8
)

// ListenKey names the Socket Mode connection of the sink's app: a short
// hash of the app-level token (never the token), so that the sinks of one
// app share one connection. It is "" without an app-level token or without
// the bot token (an incoming webhook has no buttons).
func (s *Sink) ListenKey() string {
	if !s.buttons() {
		return ""
	}
	sum := sha256.Sum256([]byte(s.cfg.AppToken))
	return "slack-app:" + hex.EncodeToString(sum[:6])
}

// Listen holds a Socket Mode connection of the sink's app (slack-go's
// socketmode client: apps.connections.open with the app-level token, then
// the WebSocket it names) until ctx ends, and hands the clicks on relay's
// buttons to acts. Every envelope is acknowledged as it arrives, before
// acts is asked: Slack wants the acknowledgement within 3 seconds, on
// every connection. A person whose click changed nothing, or who may not
// act, gets the answer as an ephemeral message, seen by them alone; so
// does one who shelved (shelving edits no message). A dropped connection,
// or a disconnect that Slack asks for, is opened again at once through a
// new apps.connections.open URL; slack-go waits between attempts only
// when opening fails, and as long as a rate-limited answer asks. Nothing
// in relay waits between connections: the events are read as they come,
// so a reconnection never delays an acknowledgement. It returns nil when
// ctx ends, and an error when Slack refuses the app-level token.
func (s *Sink) Listen(ctx context.Context, acts notify.Actions) error {
	if !s.buttons() {
		return fmt.Errorf("slack sink %q: no Socket Mode without the app-level token (RELAY_SLACK_APP_TOKEN) and the bot token", s.cfg.Name)
	}
	client := *s.hooks
	client.Timeout = s.cfg.Timeout
	api := slackapi.New(s.cfg.Token, slackapi.OptionAppLevelToken(s.cfg.AppToken),
		slackapi.OptionAPIURL(apiURL(s.cfg.APIURL)), slackapi.OptionHTTPClient(&client))
	sm := socketmode.New(api, socketmode.OptionLog(debugLog{s}))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := &listener{s: s, sm: sm, acts: acts, sem: make(chan struct{}, maxActing)}
	ran := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { ran <- sm.RunContext(ctx) })
	err := l.loop(ctx, ran)
	cancel()
	wg.Wait()
	l.acting.Wait()
	return err
}

// debugLog passes what socketmode logs (only in its debug mode, which
// relay leaves off) to the sink's log, cleaned of the tokens.
type debugLog struct{ s *Sink }

func (d debugLog) Output(_ int, msg string) error {
	d.s.log.Debug("slack socket mode: "+d.s.secrets.String(strings.TrimSpace(msg)), "sink", d.s.cfg.Name)
	return nil
}

// listener is one Listen: the socketmode client's events, the clicks being
// handed to Actions, and the user groups read for them.
type listener struct {
	s    *Sink
	sm   *socketmode.Client
	acts notify.Actions

	sem    chan struct{}
	acting sync.WaitGroup

	groupsMu     sync.Mutex
	groupsAt     time.Time
	groupsOf     map[string][]string
	groupsWarned bool
}

// loop reads the client's events until ctx ends or the client gives up.
// Nothing it does waits for more than queueing an acknowledgement: the
// client hands over the envelopes of every connection through this one
// loop, and each must be acknowledged within 3 seconds.
func (l *listener) loop(ctx context.Context, ran <-chan error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-ran:
			if ctx.Err() != nil || err == nil || errors.Is(err, context.Canceled) {
				return nil
			}
			return l.refused(err)
		case ev := <-l.sm.Events:
			l.handle(ctx, ev)
		}
	}
}

// refused words the error that made socketmode stop reconnecting: Slack
// refused the app-level token.
func (l *listener) refused(err error) error {
	return fmt.Errorf("slack sink %q: Slack refused the app-level token (RELAY_SLACK_APP_TOKEN) at apps.connections.open: %s; "+
		"it must be an xapp- token of the app whose bot token relay posts with, with the scope connections:write, and Socket Mode turned on",
		l.s.cfg.Name, l.s.clean(err))
}

// handle takes one event of the socketmode client.
func (l *listener) handle(ctx context.Context, ev socketmode.Event) {
	s := l.s
	switch ev.Type {
	case socketmode.EventTypeConnected:
		s.log.Info("slack socket mode connected", "sink", s.cfg.Name)
	case socketmode.EventTypeConnectionError:
		if c, ok := ev.Data.(*slackapi.ConnectionErrorEvent); ok {
			s.log.Warn("slack socket mode could not connect, trying again", "sink", s.cfg.Name,
				"attempt", c.Attempt, "backoff", c.Backoff, "error", s.clean(c.ErrorObj))
		}
	case socketmode.EventTypeIncomingError, socketmode.EventTypeErrorBadMessage, socketmode.EventTypeErrorWriteFailed:
		s.log.Debug("slack socket mode frame", "sink", s.cfg.Name, "event", string(ev.Type))
	case socketmode.EventTypeInteractive:
		l.ack(ev.Request)
		if cb, ok := ev.Data.(slackapi.InteractionCallback); ok && cb.Type == slackapi.InteractionTypeBlockActions {
			l.clicked(ctx, ev.Request.EnvelopeID, cb)
		}
	case socketmode.EventTypeEventsAPI, socketmode.EventTypeSlashCommand:
		l.ack(ev.Request)
	}
}

// ack acknowledges an envelope. It does not wait more than ackWithin to
// queue it: past that, Slack has given up on it anyway.
func (l *listener) ack(req *socketmode.Request) {
	if req == nil || req.EnvelopeID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ackWithin)
	defer cancel()
	if err := l.sm.AckCtx(ctx, req.EnvelopeID, nil); err != nil {
		l.s.log.Warn("slack socket mode: could not acknowledge an envelope", "sink", l.s.cfg.Name,
			"envelope_id", req.EnvelopeID, "error", l.s.clean(err))
	}
}

// click is one press of one of relay's buttons.
type click struct {
	action  notify.Action
	channel string
	user    string
}

// clicked hands every click of relay's buttons in cb to Actions, each in
// a goroutine of its own, at most maxActing at once.
func (l *listener) clicked(ctx context.Context, envelopeID string, cb slackapi.InteractionCallback) {
	for _, ba := range cb.ActionCallback.BlockActions {
		a, ok := actionOf(ba)
		if !ok {
			continue
		}
		a.Sink = strings.TrimPrefix(ba.BlockID, blockPrefix)
		a.Ref = envelopeID
		a.Actor = notify.Actor{Via: "slack", ID: cb.User.ID, Name: firstNonEmpty(cb.User.Name, cb.User.Username)}
		c := click{action: a, channel: firstNonEmpty(cb.Channel.ID, cb.Container.ChannelID), user: cb.User.ID}
		l.acting.Go(func() {
			select {
			case l.sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-l.sem }()
			l.act(ctx, c)
		})
	}
}

// actionOf maps a button of relay's to the action it asks for.
func actionOf(ba *slackapi.BlockAction) (notify.Action, bool) {
	if ba == nil || !strings.HasPrefix(ba.BlockID, blockPrefix) || ba.Value == "" {
		return notify.Action{}, false
	}
	alarm := []string{ba.Value}
	switch ba.ActionID {
	case ActionAck:
		return notify.Action{Kind: notify.Acknowledge, Alarms: alarm}, true
	case ActionUnack:
		return notify.Action{Kind: notify.Unacknowledge, Alarms: alarm}, true
	case ActionShelve1h:
		return notify.Action{Kind: notify.Shelve, Alarms: alarm, ShelveFor: time.Hour}, true
	case ActionShelveCleared:
		return notify.Action{Kind: notify.Shelve, Alarms: alarm}, true
	case ActionAckDigest:
		return notify.Action{Kind: notify.Acknowledge, Digest: ba.Value}, true
	}
	return notify.Action{}, false
}

// act asks Actions for c and answers the person when the messages will not
// show what became of it.
func (l *listener) act(ctx context.Context, c click) {
	s := l.s
	c.action.Actor.Groups = l.groups(ctx, c.user)
	res, err := l.acts.Act(ctx, c.action)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("slack click could not be applied", "sink", s.cfg.Name, "ref", c.action.Ref,
			"action", string(c.action.Kind), "user", c.user, "error", s.clean(err))
		l.ephemeral(ctx, c, "Relay could not record that just now; please try again.")
		return
	}
	if res.NotAllowed || len(res.Applied) == 0 || c.action.Kind == notify.Shelve {
		text := res.Text
		if text == "" {
			text = "Nothing changed."
		}
		l.ephemeral(ctx, c, text)
	}
}

// ephemeral shows text to the person who clicked, alone, in the channel of
// the click.
func (l *listener) ephemeral(ctx context.Context, c click, text string) {
	s := l.s
	if c.channel == "" || c.user == "" {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if _, err := s.api.PostEphemeralContext(rctx, c.channel, c.user, slackapi.MsgOptionText(slackEscape(text), false)); err != nil {
		s.log.Warn("slack: could not answer a click", "sink", s.cfg.Name, "ref", c.action.Ref, "user", c.user,
			"error", s.clean(err))
	}
}

// groups returns the ids of the Slack user groups user belongs to, from
// usergroups.list read at most every groupsTTL. When they cannot be read
// (the bot lacks usergroups:read), they are empty, and that is logged
// once.
func (l *listener) groups(ctx context.Context, user string) []string {
	s := l.s
	l.groupsMu.Lock()
	defer l.groupsMu.Unlock()
	now := s.cfg.Clock.Now()
	if l.groupsOf == nil || now.Sub(l.groupsAt) >= groupsTTL {
		l.groupsAt, l.groupsOf = now, map[string][]string{}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		gs, err := s.api.GetUserGroupsContext(rctx, slackapi.GetUserGroupsOptionIncludeUsers(true))
		cancel()
		if err != nil {
			if !l.groupsWarned {
				l.groupsWarned = true
				s.log.Warn("slack: cannot read the user groups (usergroups.list), so ack_by cannot name them; give the bot the scope usergroups:read",
					"sink", s.cfg.Name, "error", s.clean(err))
			}
			return nil
		}
		for _, g := range gs {
			for _, u := range g.Users {
				l.groupsOf[u] = append(l.groupsOf[u], g.ID)
			}
		}
	}
	return l.groupsOf[user]
}

// compile-time checks of the interfaces the sink implements.
var (
	_ notify.Listener   = (*Sink)(nil)
	_ notify.AckCarrier = (*Sink)(nil)
)
