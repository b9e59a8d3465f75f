package service

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/route"
)

// Preflight makes every check relay run makes before it starts (the ops
// listener's certificate files among them), without
// starting anything, and returns every problem found: relay check calls it,
// so that it accepts exactly what relay run accepts. The rules file is
// rulesPath, named rulesFrom in messages (RELAY_RULES, or --rules); the
// rules are nil when the file does not load.
func Preflight(cfg config.Config, rulesPath, rulesFrom string, lookup func(string) (string, bool)) (*route.Rules, []error) {
	problems := config.Problems(cfg.RequireUpstream())
	if err := StatePathProblem(cfg.Store.Path); err != nil {
		problems = append(problems, err)
	}
	if err := CertFilesProblem(cfg); err != nil {
		problems = append(problems, err)
	}
	rules, err := loadRules(rulesPath, rulesFrom, lookup)
	if err != nil {
		return nil, append(problems, config.Problems(err)...)
	}
	return rules, append(problems, SinkEnvProblems(rules, cfg)...)
}

// PreflightTenants makes the checks of Preflight for every tenant relay run
// serves: the upstream settings, the ops listener's certificate files, each
// tenant's state file and rules file.
func PreflightTenants(cfg config.Config, lookup func(string) (string, bool)) []error {
	problems := config.Problems(cfg.RequireUpstream())
	if err := CertFilesProblem(cfg); err != nil {
		problems = append(problems, err)
	}
	for _, t := range cfg.Tenants() {
		from, prefix := "RELAY_RULES", ""
		if cfg.TenantsFile != "" {
			from, prefix = "rules", fmt.Sprintf("tenant %s (%s): ", t.ID, t.Source)
		}
		var tp []error
		if err := StatePathProblem(t.StatePath); err != nil {
			tp = append(tp, err)
		}
		rules, err := loadRules(t.Rules, from, lookup)
		if err != nil {
			tp = append(tp, config.Problems(err)...)
		} else {
			tp = append(tp, SinkEnvProblems(rules, cfg)...)
		}
		for _, err := range tp {
			if prefix != "" {
				err = fmt.Errorf("%s%w", prefix, err)
			}
			problems = append(problems, err)
		}
	}
	return problems
}

// CertFilesProblem reports why the certificate and key files of the ops
// listener (RELAY_TLS_CERT_FILE, RELAY_TLS_KEY_FILE) do not load, naming
// the file; nil when they load or are not set.
func CertFilesProblem(cfg config.Config) error {
	if cfg.TLS.CertFile == "" || cfg.TLS.KeyFile == "" {
		return nil
	}
	_, err := LoadCertFiles(cfg.TLS.CertFile, cfg.TLS.KeyFile, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	return err
}

// loadRules loads the rules file, naming where its path came from when the
// file cannot be opened.
func loadRules(path, from string, lookup func(string) (string, bool)) (*route.Rules, error) {
	rules, err := route.Load(path, lookup)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s=%s: no such file: set %s to the path of your rules file (rules.example.yaml shows one)", from, path, from)
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%s=%s: permission denied: the rules file must be readable by relay's user", from, path)
	}
	return rules, err
}

// StatePathProblem reports why relay could not open or create the state
// file at path: a missing or read-only directory, or a path that is not a
// regular file.
func StatePathProblem(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("RELAY_STATE_PATH=%s: directory %s does not exist: create it, or mount a volume there", path, dir)
	case err != nil:
		return fmt.Errorf("RELAY_STATE_PATH=%s: %w", path, err)
	case !st.IsDir():
		return fmt.Errorf("RELAY_STATE_PATH=%s: %s is not a directory", path, dir)
	}
	st, err = os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if syscall.Access(dir, 2 /* W_OK */) != nil {
			return fmt.Errorf("RELAY_STATE_PATH=%s: directory %s is not writable by relay's user, so the state file cannot be created", path, dir)
		}
	case err != nil:
		return fmt.Errorf("RELAY_STATE_PATH=%s: %w", path, err)
	case !st.Mode().IsRegular():
		return fmt.Errorf("RELAY_STATE_PATH=%s: not a regular file", path)
	case syscall.Access(path, 6 /* R_OK|W_OK */) != nil:
		return fmt.Errorf("RELAY_STATE_PATH=%s: the state file is not readable and writable by relay's user", path)
	}
	return nil
}
