// Package mqtttest runs Debian's Mosquitto for tests: a broker with a
// password file, a listener in clear and one over TLS, and persistence, and
// mosquitto_sub as an independent subscriber. Without Mosquitto a test is
// skipped outside CI and fails in CI (where .ci/run installs it).
package mqtttest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/notify/notifytest"
)

// Broker is a Mosquitto started for one test: a listener in clear and one
// over TLS, a password file with one user, and persistence, so that a
// restart keeps the retained messages and the sessions.
type Broker struct {
	t testing.TB
	// Dir holds its configuration, log and persistence file.
	Dir string
	// Port is the listener in clear, tls the one over TLS.
	Port, tls int
	// TLSFiles are the authority and the broker's certificate.
	TLSFiles notifytest.TLSFiles
	// User and Pass are the user of the password file.
	User, Pass string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Need returns the path of Debian's mosquitto program name, skipping t
// without it outside CI and failing it in CI (where .ci/run installs it).
func Need(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/" + name); err == nil {
		return "/usr/sbin/" + name
	}
	why := name + " is not installed: apt-get install mosquitto mosquitto-clients (Debian's packages)"
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start starts Mosquitto with a user and TLS.
func Start(t testing.TB) *Broker {
	t.Helper()
	b := &Broker{t: t, Dir: t.TempDir(), Port: freePort(t), tls: freePort(t), User: "relay", Pass: "broker-password-0123456789"}
	b.TLSFiles = notifytest.NewTLSFiles(t)
	cert, key := filepath.Join(b.Dir, "server.crt"), filepath.Join(b.Dir, "server.key")
	b.TLSFiles.WriteServerPair(t, cert, key)
	passwd := filepath.Join(b.Dir, "passwd")
	if out, err := exec.Command(Need(t, "mosquitto_passwd"), "-c", "-b", passwd, b.User, b.Pass).CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd: %v\n%s", err, out)
	}
	// A second user: the same sink's credentials after a rotation.
	if out, err := exec.Command(Need(t, "mosquitto_passwd"), "-b", passwd, b.User+"-rotated", b.Pass+"-rotated").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd: %v\n%s", err, out)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	// user: started as root, Mosquitto would become the user mosquitto,
	// who cannot read the test's directory.
	conf := fmt.Sprintf(`user %s
per_listener_settings false
allow_anonymous false
password_file %s
persistence true
persistence_location %s/
autosave_interval 1
listener %d 127.0.0.1
listener %d 127.0.0.1
cafile %s
certfile %s
keyfile %s
`, me.Username, passwd, b.Dir, b.Port, b.tls, b.TLSFiles.CA, cert, key)
	if err := os.WriteFile(filepath.Join(b.Dir, "mosquitto.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Start()
	t.Cleanup(b.Stop)
	return b
}

// Start starts the broker again after Stop, and waits until it listens.
func (b *Broker) Start() {
	b.t.Helper()
	cmd := exec.Command(Need(b.t, "mosquitto"), "-c", filepath.Join(b.Dir, "mosquitto.conf"))
	log, err := os.OpenFile(filepath.Join(b.Dir, "mosquitto.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		b.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.mu.Lock()
	b.cmd = cmd
	b.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(b.Port))
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(b.Dir, "mosquitto.log"))
			b.t.Fatalf("mosquitto did not listen within 10 s:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop ends the broker the way a crash or a restart does: SIGTERM, which
// makes Mosquitto save its persistence file.
func (b *Broker) Stop() {
	b.mu.Lock()
	cmd := b.cmd
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// URL is the listener in clear.
func (b *Broker) URL() string { return "mqtt://127.0.0.1:" + strconv.Itoa(b.Port) }

// TLSURL is the listener over TLS.
func (b *Broker) TLSURL() string { return "mqtts://127.0.0.1:" + strconv.Itoa(b.tls) }

// Subscriber is mosquitto_sub, an independent client, reading topic at
// QoS 1 with a persistent session (id), its lines "topic payload".
type Subscriber struct {
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

// Subscribe starts mosquitto_sub on topic with the session id until ctx
// ends; extra are more of its arguments.
func (b *Broker) Subscribe(ctx context.Context, id, topic string, extra ...string) *Subscriber {
	b.t.Helper()
	args := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(b.Port), "-u", b.User, "-P", b.Pass,
		"-q", "1", "-v", "-t", topic, "-i", id, "-c"}, extra...)
	cmd := exec.CommandContext(ctx, Need(b.t, "mosquitto_sub"), args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	s := &Subscriber{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			s.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	return s
}

func (s *Subscriber) Got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// WaitFor waits until the subscriber's lines hold every one of wants.
func (s *Subscriber) WaitFor(t testing.TB, within time.Duration, wants ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		all := strings.Join(s.Got(), "\n")
		missing := 0
		for _, w := range wants {
			if !strings.Contains(all, w) {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the subscriber lacks %d of %d messages after %s; it read:\n%s", missing, len(wants), within, all)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Reconfigure appends lines to the broker's configuration and restarts it.
func (b *Broker) Reconfigure(lines string) {
	b.t.Helper()
	f, err := os.OpenFile(filepath.Join(b.Dir, "mosquitto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.t.Fatal(err)
	}
	_, err = f.WriteString(lines)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.t.Fatal(err)
	}
	b.Stop()
	b.Start()
}

// Log is what the broker has logged so far.
func (b *Broker) Log() string {
	out, _ := os.ReadFile(filepath.Join(b.Dir, "mosquitto.log"))
	return string(out)
}

// Retained reads the retained messages under topic as a subscriber that
// connects now does, their topics sorted.
func (b *Broker) Retained(t testing.TB, topic string) []string {
	t.Helper()
	out, err := exec.Command(Need(t, "mosquitto_sub"), "-h", "127.0.0.1", "-p", strconv.Itoa(b.Port), "-u", b.User, "-P", b.Pass,
		"-t", topic, "-v", "-W", "2").Output()
	if err != nil && !strings.Contains(err.Error(), "exit status 27") { // 27: the -W timeout
		t.Fatalf("late mosquitto_sub: %v\n%s", err, out)
	}
	var topics []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if topic, _, ok := strings.Cut(l, " "); ok {
			topics = append(topics, topic)
		}
	}
	slices.Sort(topics)
	return topics
}
