package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/redact"
)

// TestReferenceDocumentsEveryVariableOnce: every variable has a meaning, a
// name of its own, and says what unset means only when its tag has no
// default to say it; nothing breaks the reference's table.
func TestReferenceDocumentsEveryVariableOnce(t *testing.T) {
	defaults := Defaults()
	seen := map[string]bool{}
	for _, v := range Reference {
		if seen[v.Name] {
			t.Errorf("%s is in Reference twice", v.Name)
		}
		seen[v.Name] = true
		if strings.TrimSpace(v.Doc) == "" {
			t.Errorf("%s has no Doc", v.Name)
		}
		if _, ok := defaults[v.Name]; ok && v.Unset != "" {
			t.Errorf("%s has a default, %q, and Unset %q: drop Unset", v.Name, defaults[v.Name], v.Unset)
		}
		if strings.ContainsAny(v.Doc+v.Unset, "|\n") {
			t.Errorf("%s: a | or a line break in Doc or Unset breaks the table", v.Name)
		}
	}
}

// TestSecretVariablesAreThoseAddSecretsHides: the variables Reference marks
// secret are exactly those whose values Config.AddSecrets adds to the
// redaction set.
func TestSecretVariablesAreThoseAddSecretsHides(t *testing.T) {
	var c Config
	value := map[string]string{} // the value given to each variable, to its name
	setStrings(reflect.ValueOf(&c).Elem(), "", fieldVars(reflect.TypeOf(c), ""), value)
	set := redact.New()
	c.AddSecrets(set)
	var hidden []string
	for _, v := range set.Values() {
		if name, ok := value[v]; ok {
			hidden = append(hidden, name)
		}
	}
	var marked []string
	for _, v := range Reference {
		if v.Secret {
			marked = append(marked, v.Name)
		}
	}
	slices.Sort(hidden)
	slices.Sort(marked)
	if !slices.Equal(hidden, marked) {
		t.Fatalf("AddSecrets hides %v; Reference marks %v secret", hidden, marked)
	}
}

// setStrings sets every string field of v that a variable reads to a value
// of its own, recorded in value.
func setStrings(v reflect.Value, prefix string, fields, value map[string]string) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		path := prefix + f.Name
		switch name, ok := fields[path]; {
		case ok && f.Type.Kind() == reflect.String:
			val := "value-of-" + name
			v.Field(i).SetString(val)
			value[val] = name
		case !ok && f.Type.Kind() == reflect.Struct:
			setStrings(v.Field(i), path+": ", fields, value)
		}
	}
}

// TestDesignStatesEveryDefault: docs/design.md §9 writes each default of the
// env tags in brackets after its variable.
func TestDesignStatesEveryDefault(t *testing.T) {
	s9 := strings.Join(strings.Fields(designSection(t, 9)), " ")
	for name, def := range Defaults() {
		if !strings.Contains(s9, "`"+name+"` ("+def+")") {
			t.Errorf("%s §9 does not say `%s` (%s)", designPath, name, def)
		}
	}
}
