package mqtt_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/notify/notifytest"
)

// broker is a Mosquitto started for one test: a listener in clear and one
// over TLS, a password file with one user, and persistence, so that a
// restart keeps the retained messages and the sessions.
type broker struct {
	t          *testing.T
	dir        string
	port, tls  int
	tlsFiles   notifytest.TLSFiles
	user, pass string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// need returns the path of Debian's mosquitto program name, skipping t
// without it outside CI and failing it in CI (where .ci/run installs it).
func need(t *testing.T, name string) string {
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

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startBroker starts Mosquitto with a user and TLS.
func startBroker(t *testing.T) *broker {
	t.Helper()
	b := &broker{t: t, dir: t.TempDir(), port: freePort(t), tls: freePort(t), user: "relay", pass: "broker-password-0123456789"}
	b.tlsFiles = notifytest.NewTLSFiles(t)
	cert, key := filepath.Join(b.dir, "server.crt"), filepath.Join(b.dir, "server.key")
	b.tlsFiles.WriteServerPair(t, cert, key)
	passwd := filepath.Join(b.dir, "passwd")
	if out, err := exec.Command(need(t, "mosquitto_passwd"), "-c", "-b", passwd, b.user, b.pass).CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd: %v\n%s", err, out)
	}
	// A second user: the same sink's credentials after a rotation.
	if out, err := exec.Command(need(t, "mosquitto_passwd"), "-b", passwd, b.user+"-rotated", b.pass+"-rotated").CombinedOutput(); err != nil {
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
`, me.Username, passwd, b.dir, b.port, b.tls, b.tlsFiles.CA, cert, key)
	if err := os.WriteFile(filepath.Join(b.dir, "mosquitto.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *broker) start() {
	b.t.Helper()
	cmd := exec.Command(need(b.t, "mosquitto"), "-c", filepath.Join(b.dir, "mosquitto.conf"))
	log, err := os.OpenFile(filepath.Join(b.dir, "mosquitto.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
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
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(b.port))
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(b.dir, "mosquitto.log"))
			b.t.Fatalf("mosquitto did not listen within 10 s:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the broker the way a crash or a restart does: SIGTERM, which
// makes Mosquitto save its persistence file.
func (b *broker) stop() {
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

func (b *broker) url() string    { return "mqtt://127.0.0.1:" + strconv.Itoa(b.port) }
func (b *broker) tlsURL() string { return "mqtts://127.0.0.1:" + strconv.Itoa(b.tls) }

// subscriber is mosquitto_sub, an independent client, reading topic at
// QoS 1 with a persistent session (id), its lines "topic payload".
type subscriber struct {
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func (b *broker) subscribe(ctx context.Context, id, topic string, extra ...string) *subscriber {
	b.t.Helper()
	args := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(b.port), "-u", b.user, "-P", b.pass,
		"-q", "1", "-v", "-t", topic, "-i", id, "-c"}, extra...)
	cmd := exec.CommandContext(ctx, need(b.t, "mosquitto_sub"), args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	s := &subscriber{done: make(chan struct{})}
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

func (s *subscriber) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// waitFor waits until the subscriber's lines hold every one of wants.
func (s *subscriber) waitFor(t *testing.T, within time.Duration, wants ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		all := strings.Join(s.got(), "\n")
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
