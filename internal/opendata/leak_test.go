package opendata_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/redact/redacttest"
)

// TestUpstreamClientLeaksNoSecret runs the shared leak check on the upstream
// client: an upstream that echoes each whole request (the login body with
// the app secret, the Authorization header with the token) in its failure
// answers, as an envelope description, as an error page or after issuing a
// token. Neither the app secret, nor a token, nor the password of the base
// URL may reach an error, a debug-level log line or a metric.
func TestUpstreamClientLeaksNoSecret(t *testing.T) {
	const (
		secret  = "LEAK-APP-SECRET-VALUE"
		token   = "LEAK-ISSUED-TOKEN-VALUE"
		urlPass = "LEAK-BASE-URL-PASSWORD"
	)
	var calls atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		echo := fmt.Sprintf("%s %s auth=%q body=%s", r.Method, r.URL.Path, r.Header.Get("Authorization"), body)
		if u, p, ok := r.BasicAuth(); ok {
			echo += " basic=" + u + ":" + p
		}
		n := calls.Add(1)
		switch {
		case strings.HasSuffix(r.URL.Path, "/login") && n%2 == 1:
			// A refusal whose text quotes the request.
			_ = json.NewEncoder(w).Encode(map[string]any{"code": "A0301", "description": echo, "errorMsg": echo, "errorKey": echo})
		case strings.HasSuffix(r.URL.Path, "/login"):
			w.Header().Set("Token", token)
			_ = json.NewEncoder(w).Encode(map[string]any{"code": "00000", "description": "ok",
				"data": map[string]any{"accessToken": token, "expiresIn": "14400", "scope": "tenantId:1"}})
		case n%3 == 0:
			http.Error(w, echo, http.StatusBadGateway)
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"code": "B0001", "description": echo})
		}
	}))
	defer up.Close()
	log, logs := debugLogger()
	reg := prometheus.NewRegistry()
	base := strings.Replace(up.URL, "http://", "http://relay:"+urlPass+"@", 1)
	c, err := opendata.New(opendata.Config{BaseURL: base, AppID: "app", AppSecret: secret, RateLimit: 600,
		Logger: log, Metrics: opendata.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	for i := range 6 {
		var err error
		if i%2 == 0 {
			_, err = c.Login(t.Context())
		} else {
			_, err = c.AlarmPage(t.Context(), opendata.AlarmQuery{Page: 1, Size: 10,
				Start: time.Now().Add(-time.Hour), End: time.Now()})
		}
		if err != nil {
			texts[fmt.Sprintf("error %d", i)] = fmt.Sprintf("%v | %+v", err, err)
		}
	}
	if len(texts) < 3 {
		t.Fatalf("only %d calls failed; the check would prove little", len(texts))
	}
	texts["the log"] = logs.String()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var metrics strings.Builder
	for _, mf := range mfs {
		metrics.WriteString(mf.String())
	}
	texts["the metrics"] = metrics.String()
	redacttest.AssertNoSecret(t, []string{secret, token, urlPass}, texts)
}

func debugLogger() (*slog.Logger, *syncBuffer) {
	b := &syncBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}
