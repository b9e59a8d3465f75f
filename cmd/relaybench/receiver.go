package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// receiverIDs reads the ids of the events or alerts one request carries; an
// error is answered with status.
type receiverIDs func(h http.Header, body []byte) (ids []string, status int, err error)

// receiver is the local endpoint the webhook figures deliver to: an HTTP
// server on 127.0.0.1 in this process that answers 204, as a consumer that
// only queues the event would, and counts the distinct events it accepted.
// The relay's webhook sink and Alertmanager post to the same kind of
// receiver; only the way ids are read differs.
type receiver struct {
	srv  *http.Server
	url  string
	ids  receiverIDs
	want int
	// done is closed when want distinct ids arrived.
	done chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	seen     map[string]struct{}
	requests int
	rejected int
	// lastErr is the latest rejection, for the error of wait.
	lastErr error
	// last is when the want-th distinct id arrived.
	last time.Time
}

// startReceiver starts a receiver at path on a free port of 127.0.0.1 that
// waits for want distinct ids.
func startReceiver(path string, want int, ids receiverIDs) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	r := &receiver{ids: ids, want: want, done: make(chan struct{}), seen: make(map[string]struct{}, want),
		url: "http://" + ln.Addr().String() + path}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+path, r.serve)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	r.wg.Go(func() { _ = r.srv.Serve(ln) })
	return r, nil
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	ids, status, err := r.ids(req.Header, body)
	r.mu.Lock()
	r.requests++
	if err != nil {
		r.rejected++
		r.lastErr = err
		r.mu.Unlock()
		http.Error(w, err.Error(), status)
		return
	}
	for _, id := range ids {
		r.seen[id] = struct{}{}
	}
	if len(r.seen) >= r.want && r.last.IsZero() {
		r.last = time.Now()
		close(r.done)
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// progress returns how many distinct ids arrived, and the latest rejection
// if a request was refused.
func (r *receiver) progress() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastErr != nil {
		return len(r.seen), fmt.Errorf("the receiver refused %d of %d requests, the latest: %w", r.rejected, r.requests, r.lastErr)
	}
	return len(r.seen), nil
}

// accepted reports whether the receiver accepted the id.
func (r *receiver) accepted(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.seen[id]
	return ok
}

// repeats returns how many accepted requests carried an id accepted before:
// deliveries made again (at least once, across a kill), for receivers
// whose requests carry one id each.
func (r *receiver) repeats() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests - r.rejected - len(r.seen)
}

// wait returns when the want-th distinct id arrived, or an error when ctx
// ends or limit passes first.
func (r *receiver) wait(ctx context.Context, limit time.Duration) (time.Time, error) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-r.done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.last, nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-t.C:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	err := fmt.Errorf("receiver: %d of %d distinct ids after %s (%d requests, %d rejected)", len(r.seen), r.want, limit, r.requests, r.rejected)
	if r.lastErr != nil {
		err = fmt.Errorf("%w; the last rejection: %w", err, r.lastErr)
	}
	return time.Time{}, err
}

// close stops the server and waits for it.
func (r *receiver) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A connection the client dialled but sent nothing on (a
		// concurrent sink dials ahead) counts as active for 5 s; every
		// event is in by now, so nothing is lost by closing it.
		err = r.srv.Close()
	}
	r.wg.Wait()
	return err
}

// signedIDs reads the webhook-id of a request signed by the Standard
// Webhooks scheme (v1) with key, checked independently of the sink's signer;
// a request that does not verify is answered 401.
func signedIDs(key []byte) receiverIDs {
	return func(h http.Header, body []byte) ([]string, int, error) {
		id, ts, sigs := h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), h.Get("Webhook-Signature")
		if id == "" || ts == "" || sigs == "" {
			return nil, http.StatusUnauthorized, errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
		}
		if _, err := strconv.ParseInt(ts, 10, 64); err != nil {
			return nil, http.StatusUnauthorized, fmt.Errorf("webhook-timestamp %q is not a number of seconds", ts)
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(body)
		want := mac.Sum(nil)
		for _, pair := range strings.Fields(sigs) {
			version, sig, ok := strings.Cut(pair, ",")
			if !ok || version != "v1" {
				continue
			}
			if got, err := base64.StdEncoding.DecodeString(sig); err == nil && hmac.Equal(got, want) {
				return []string{id}, 0, nil
			}
		}
		return nil, http.StatusUnauthorized, fmt.Errorf("event %s: no v1 signature matches", id)
	}
}

// alertIDs reads the alerts of an Alertmanager webhook notification: the
// label amIDLabel of each.
func alertIDs(_ http.Header, body []byte) ([]string, int, error) {
	var n struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("not an Alertmanager notification: %w", err)
	}
	ids := make([]string, 0, len(n.Alerts))
	for _, a := range n.Alerts {
		id := a.Labels[amIDLabel]
		if id == "" {
			return nil, http.StatusBadRequest, fmt.Errorf("an alert without the label %s", amIDLabel)
		}
		ids = append(ids, id)
	}
	return ids, 0, nil
}
