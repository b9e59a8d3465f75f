package service

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestReadyzShowsAdvisoryChecksWithoutFailing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		checks []Check
		code   int
		want   map[string]string
	}{
		{"all hold", []Check{{Name: "store", Func: func() error { return nil }}}, 200, map[string]string{"store": "ok"}},
		{"advisory fails", []Check{
			{Name: "store", Func: func() error { return nil }},
			{Name: "end_detection", Func: func() error { return errors.New("stalled") }, Advisory: true},
		}, 200, map[string]string{"store": "ok", "end_detection": "stalled"}},
		{"required fails", []Check{
			{Name: "upstream", Func: func() error { return errors.New("no answer") }},
			{Name: "end_detection", Func: func() error { return nil }, Advisory: true},
		}, 503, map[string]string{"upstream": "no answer", "end_detection": "ok"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ops, err := ListenOps("127.0.0.1:0", prometheus.NewRegistry(), tc.checks)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- ops.Serve(ctx) }()
			defer func() { cancel(); <-done }()
			resp, err := http.Get("http://" + ops.Addr() + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got map[string]string
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.code || len(got) != len(tc.want) {
				t.Fatalf("/readyz = %d %v; want %d %v", resp.StatusCode, got, tc.code, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("/readyz = %d %v; want %d %v", resp.StatusCode, got, tc.code, tc.want)
				}
			}
		})
	}
}
