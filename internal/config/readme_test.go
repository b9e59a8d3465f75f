package config

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sethvargo/go-envconfig"
	"gopkg.in/yaml.v3"
)

// TestEveryVariableIsDocumentedInTheReadme: docs/configure.md's
// configuration table has a row for every variable.
func TestEveryVariableIsDocumentedInTheReadme(t *testing.T) {
	b, err := os.ReadFile("../../docs/configure.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, v := range Variables {
		if !strings.Contains(readme, "| `"+v+"` |") {
			t.Errorf("docs/configure.md has no row for %s in its configuration table", v)
		}
	}
}

// TestReadmeTenantsFileLoads loads the tenants file of docs/scale-out.md's
// "Scaling out" section, with the variables and files it names set.
func TestReadmeTenantsFileLoads(t *testing.T) {
	b, err := os.ReadFile("../../docs/scale-out.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Scaling out\n")
	if !ok {
		t.Fatal(`docs/scale-out.md has no "## Scaling out" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatal("the Scaling out section has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	var doc struct {
		Tenants []struct {
			Env string `yaml:"app_secret_env"`
		} `yaml:"tenants"`
	}
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"RELAY_TENANTS_FILE": "/etc/relay-tenants/tenants.yaml"}
	for _, tn := range doc.Tenants {
		if tn.Env != "" {
			env[tn.Env] = "secret"
		}
	}
	c, err := LoadWith(context.Background(), envconfig.MapLookuper(env), Sources{
		ReadFile: func(name string) ([]byte, error) {
			if name == env["RELAY_TENANTS_FILE"] {
				return []byte(block), nil
			}
			return []byte("secret"), nil
		},
		Hostname: host("relay-0"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Tenants()); n != len(doc.Tenants) || n < 2 {
		t.Fatalf("%d tenants loaded from the page's %d", n, len(doc.Tenants))
	}
}
