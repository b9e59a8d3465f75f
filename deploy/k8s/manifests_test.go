// Package k8s_test checks the kustomize base in deploy/k8s/base, every
// overlay in deploy/k8s/overlays and the replicated overlay deploy/k8s/ha,
// built as kustomize builds them: every manifest decodes strictly into the
// fields of its Kubernetes API type (api_test.go), strategic-merge patches
// apply as the API server's library applies them (merge_test.go), every
// RELAY_ variable is one relay reads and the environment, the tenants file
// and the secret files load as relay would load them, and the properties the
// deployment depends on hold (one writer of a bbolt state file, or replicas
// of JetStream state spread over nodes and disrupted one at a time; rules
// reloadable from the ConfigMap, probes and metrics on relay's port, a
// startup probe for a slow start, a memory limit above the README's measured
// peak, a restricted security context, a network policy that lets relay's
// traffic through, and no Secret or ConfigMap in the base, whose placeholders
// every overlay would apply over the real ones).
package k8s_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/route"
)

const (
	// relayContainer is the name of relay's container in the Deployment.
	relayContainer = "relay"
	// nonRootID is the user and group of distroless's "nonroot" user, which
	// the image runs as.
	nonRootID = 65532
	// dockerfile is the image's build file, readme the docs page on
	// Kubernetes, and performance the page whose table holds the measured
	// peak memory (P6), relative to this folder.
	dockerfile  = "../../Dockerfile"
	readme      = "../../docs/kubernetes.md"
	performance = "../../docs/performance.md"
)

// The layout of deploy/k8s: a base, overlays that build on it, and the
// replicated overlay.
const (
	baseDir     = "base"
	overlaysDir = "overlays"
	exampleDir  = "overlays/example"
	haDir       = "ha"
)

// hostnameKey is the node label that anti-affinity spreads replicas over.
const hostnameKey = "kubernetes.io/hostname"

// minStateReplicas is the least RELAY_STATE_REPLICAS of replicated state:
// three JetStream servers hold each stream and bucket, so that one lost
// loses nothing.
const minStateReplicas = 3

// memoryHeadroom is how far above the peak resident memory the README
// measured (P6) relay's memory limit must be: the peak was measured once, on
// one workload, and the bench binary differs from the image.
const memoryHeadroom = 1.25

// minStartupWindow is the least time the startup probe gives relay to answer
// /healthz. Before it answers, relay waits up to 5 s for the state file's
// lock, reads the size of every outbox of the file, and waits up to 5 s for
// a first NATS connection; a large file on a slow network volume takes
// longer. Beyond the liveness window of 30 s the kubelet would restart it in
// a loop.
const minStartupWindow = 2 * time.Minute

// secretVariables are the RELAY_ variables whose values are secrets, as
// config.Reference marks them (its test holds them to what AddSecrets
// hides): the manifests must take them from a Secret, never write them as a
// literal.
var secretVariables = func() []string {
	var out []string
	for _, v := range config.Reference {
		if v.Secret {
			out = append(out, v.Name)
		}
	}
	return out
}()

// kustomization holds the fields of kustomize's Kustomization
// (kustomize.config.k8s.io/v1beta1) that this base uses. Decoding is strict,
// so a field the base starts to use must be added here, spelled as kustomize
// spells it.
type kustomization struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Resources  []string         `json:"resources"`
	Patches    []kustomizePatch `json:"patches,omitempty"`
	Images     []kustomizeImage `json:"images,omitempty"`
}

// kustomizePatch is one entry of a Kustomization's patches: a strategic
// merge patch in a file of the folder, which names its target by its
// apiVersion, kind and name. Inline patches, JSON 6902 patches and targets
// by selector are beyond this test: the strict decoding refuses them.
type kustomizePatch struct {
	Path string `json:"path"`
}

// kustomizeImage is one entry of a Kustomization's images.
type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// typeKey is the apiVersion and kind of a manifest.
type typeKey struct{ apiVersion, kind string }

// kinds are the object types the base may contain, by apiVersion and kind.
var kinds = map[typeKey]func() any{
	{"kustomize.config.k8s.io/v1beta1", "Kustomization"}: func() any { return new(kustomization) },
	{"apps/v1", "Deployment"}:                            func() any { return new(deployment) },
	{"v1", "ConfigMap"}:                                  func() any { return new(configMap) },
	{"v1", "Secret"}:                                     func() any { return new(secret) },
	{"v1", "PersistentVolumeClaim"}:                      func() any { return new(persistentVolumeClaim) },
	{"v1", "ServiceAccount"}:                             func() any { return new(serviceAccount) },
	{"networking.k8s.io/v1", "NetworkPolicy"}:            func() any { return new(networkPolicy) },
	{"policy/v1", "PodDisruptionBudget"}:                 func() any { return new(podDisruptionBudget) },
}

// bundle is what a kustomization builds, decoded: the objects of its own
// resources and, depth first, of the kustomizations they name.
type bundle struct {
	layers     []*layer // the kustomizations, the one built first
	deploy     *deployment
	configMaps map[string]*configMap
	secrets    map[string]*secret
	claims     map[string]*persistentVolumeClaim
	accounts   map[string]*serviceAccount
	policies   []*networkPolicy
	budgets    []*podDisruptionBudget
	dockerfile []byte
	readme     []byte
}

// layer is one kustomization of a build.
type layer struct {
	dir  string // the folder, relative to this one
	kust *kustomization
	// files are the manifests of the folder other than kustomization.yaml,
	// sorted; dirs the resources that are folders (other kustomizations);
	// patches the files its patches name.
	files, dirs, patches []string
	// objects are the objects the folder's own resources yield.
	objects []object
}

// object names one object of a layer.
type object struct{ file, kind, name string }

// loadBundle decodes the kustomization in dir, the kustomizations its
// resources name, the Dockerfile and the README, as kustomize would build
// them: only the manifests a kustomization lists are part of the build (a
// manifest it leaves out is reported by checkResources), and each
// kustomization's strategic-merge patches apply to what its resources built.
// Generators and transformers other than images are not resolved; the
// kustomization type refuses them.
func loadBundle(dir string) (*bundle, error) {
	b := &bundle{
		configMaps: map[string]*configMap{},
		secrets:    map[string]*secret{},
		claims:     map[string]*persistentVolumeClaim{},
		accounts:   map[string]*serviceAccount{},
	}
	errs := b.load(dir, nil)
	if len(errs) == 0 && b.deploy == nil {
		errs = append(errs, fmt.Errorf("%s: no Deployment in the build", dir))
	}
	var err error
	if b.dockerfile, err = os.ReadFile(dockerfile); err != nil {
		errs = append(errs, err)
	}
	if b.readme, err = os.ReadFile(readme); err != nil {
		errs = append(errs, err)
	}
	if perf, err := os.ReadFile(performance); err != nil {
		errs = append(errs, err)
	} else {
		b.readme = append(b.readme, perf...)
	}
	return b, errors.Join(errs...)
}

// load adds the kustomization in dir and those its resources name; from
// lists the folders that led here, so that a cycle is an error.
func (b *bundle) load(dir string, from []string) []error {
	dir = filepath.Clean(dir)
	if slices.Contains(from, dir) {
		return []error{fmt.Errorf("%s: resources lead back to %s", from[len(from)-1], dir)}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return []error{err}
	}
	l := &layer{dir: dir}
	b.layers = append(b.layers, l)
	raw := map[string][]byte{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || (filepath.Ext(name) != ".yaml" && filepath.Ext(name) != ".yml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return []error{err}
		}
		raw[name] = data
		if name != "kustomization.yaml" {
			l.files = append(l.files, name)
		}
	}
	sort.Strings(l.files)
	kfile := filepath.Join(dir, "kustomization.yaml")
	data, ok := raw["kustomization.yaml"]
	if !ok {
		return []error{fmt.Errorf("%s: missing", kfile)}
	}
	objs, err := decodeFile(kfile, data)
	if err != nil {
		return []error{err}
	}
	if len(objs) != 1 {
		return []error{fmt.Errorf("%s: want one Kustomization, found %d objects", kfile, len(objs))}
	}
	k, ok := objs[0].(*kustomization)
	if !ok {
		return []error{fmt.Errorf("%s: want a Kustomization, found %T", kfile, objs[0])}
	}
	l.kust = k
	for _, p := range k.Patches {
		l.patches = append(l.patches, p.Path)
	}
	// Patches are not manifests: they hold directives ($patch, nulls) that
	// no API type decodes.
	decoded := map[string][]any{}
	var errs []error
	for _, name := range l.files {
		if slices.Contains(l.patches, name) {
			continue
		}
		objs, err := decodeFile(filepath.Join(dir, name), raw[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		decoded[name] = objs
	}
	for _, r := range l.kust.Resources {
		p := filepath.Join(dir, r)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			l.dirs = append(l.dirs, r)
			errs = append(errs, b.load(p, append(slices.Clone(from), dir))...)
			continue
		}
		for _, obj := range decoded[r] {
			o, err := b.add(filepath.Join(dir, r), obj)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			l.objects = append(l.objects, o)
		}
	}
	for _, p := range l.patches {
		data, ok := raw[p]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: patch %s is not a file of this folder", kfile, p))
			continue
		}
		if err := b.patch(filepath.Join(dir, p), data); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// patch applies one strategic-merge patch file to the object it names, as
// kustomize does: "$patch: delete" removes the object, and any other patch
// of the Deployment merges into it as the API server's library merges
// (strategicMerge, in merge_test.go), the result decoded strictly again.
func (b *bundle) patch(file string, data []byte) error {
	js, err := yamlToJSON(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Patch string `json:"$patch"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if _, ok := kinds[typeKey{head.APIVersion, head.Kind}]; !ok {
		return fmt.Errorf("%s: unexpected apiVersion %q kind %q", file, head.APIVersion, head.Kind)
	}
	name := head.Metadata.Name
	if head.Patch == "delete" {
		if !b.remove(head.Kind, name) {
			return fmt.Errorf("%s: deletes %s %q, which is not in the build", file, head.Kind, name)
		}
		return nil
	}
	if head.Kind != "Deployment" {
		return fmt.Errorf("%s: a patch of a %s is beyond this test: patch the Deployment, or delete with $patch: delete", file, head.Kind)
	}
	if b.deploy == nil || b.deploy.Name != name {
		return fmt.Errorf("%s: patches Deployment %q, which is not in the build", file, name)
	}
	orig, err := json.Marshal(b.deploy)
	if err != nil {
		return err
	}
	original, err := jsonObject(orig)
	if err != nil {
		return err
	}
	patch, err := jsonObject(js)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	merged, err := strategicMerge(original, patch)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	mergedJS, err := json.Marshal(merged)
	if err != nil {
		return err
	}
	d := new(deployment)
	if err := decodeStrict(mergedJS, d); err != nil {
		return fmt.Errorf("%s: the patched Deployment: %w", file, err)
	}
	b.deploy = d
	return nil
}

// remove deletes the object of kind and name from the build, and reports
// whether there was one.
func (b *bundle) remove(kind, name string) bool {
	switch kind {
	case "ConfigMap":
		return deleteKey(b.configMaps, name)
	case "Secret":
		return deleteKey(b.secrets, name)
	case "PersistentVolumeClaim":
		return deleteKey(b.claims, name)
	case "ServiceAccount":
		return deleteKey(b.accounts, name)
	case "NetworkPolicy":
		n := len(b.policies)
		b.policies = slices.DeleteFunc(b.policies, func(p *networkPolicy) bool { return p.Name == name })
		return len(b.policies) < n
	case "PodDisruptionBudget":
		n := len(b.budgets)
		b.budgets = slices.DeleteFunc(b.budgets, func(p *podDisruptionBudget) bool { return p.Name == name })
		return len(b.budgets) < n
	case "Deployment":
		if b.deploy != nil && b.deploy.Name == name {
			b.deploy = nil
			return true
		}
	}
	return false
}

// deleteKey deletes name from m and reports whether it was there.
func deleteKey[V any](m map[string]V, name string) bool {
	_, ok := m[name]
	delete(m, name)
	return ok
}

// layer returns the kustomization of the build in dir.
func (b *bundle) layer(dir string) (*layer, bool) {
	for _, l := range b.layers {
		if l.dir == filepath.Clean(dir) {
			return l, true
		}
	}
	return nil, false
}

// add files one decoded object, refusing a second object of the same kind
// and name, as kustomize does.
func (b *bundle) add(file string, obj any) (object, error) {
	dup := func(kind, name string) error {
		return fmt.Errorf("%s: a second %s named %q", file, kind, name)
	}
	switch o := obj.(type) {
	case *kustomization:
		return object{}, fmt.Errorf("%s: a Kustomization belongs alone in kustomization.yaml", file)
	case *deployment:
		if b.deploy != nil {
			return object{}, fmt.Errorf("%s: Deployment %q: the build has one Deployment, %q is already defined", file, o.Name, b.deploy.Name)
		}
		b.deploy = o
		return object{file, "Deployment", o.Name}, nil
	case *configMap:
		if b.configMaps[o.Name] != nil {
			return object{}, dup("ConfigMap", o.Name)
		}
		b.configMaps[o.Name] = o
		return object{file, "ConfigMap", o.Name}, nil
	case *secret:
		if b.secrets[o.Name] != nil {
			return object{}, dup("Secret", o.Name)
		}
		b.secrets[o.Name] = o
		return object{file, "Secret", o.Name}, nil
	case *persistentVolumeClaim:
		if b.claims[o.Name] != nil {
			return object{}, dup("PersistentVolumeClaim", o.Name)
		}
		b.claims[o.Name] = o
		return object{file, "PersistentVolumeClaim", o.Name}, nil
	case *serviceAccount:
		if b.accounts[o.Name] != nil {
			return object{}, dup("ServiceAccount", o.Name)
		}
		b.accounts[o.Name] = o
		return object{file, "ServiceAccount", o.Name}, nil
	case *networkPolicy:
		b.policies = append(b.policies, o)
		return object{file, "NetworkPolicy", o.Name}, nil
	case *podDisruptionBudget:
		b.budgets = append(b.budgets, o)
		return object{file, "PodDisruptionBudget", o.Name}, nil
	}
	return object{}, fmt.Errorf("%s: unexpected object %T", file, obj)
}

// decodeFile decodes every document of a YAML file into the type of
// api_test.go that its apiVersion and kind name. Unknown fields, fields spelled with the wrong
// case, duplicate keys and unknown kinds are errors; documents holding only
// comments are skipped.
func decodeFile(name string, data []byte) ([]any, error) {
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var objs []any
	for i, doc := range docs {
		where := fmt.Sprintf("%s: document %d", name, i+1)
		js, err := yamlToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if string(js) == "null" {
			continue
		}
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(js, &tm); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		newObj, ok := kinds[typeKey{tm.APIVersion, tm.Kind}]
		if !ok {
			return nil, fmt.Errorf("%s: unexpected apiVersion %q kind %q", where, tm.APIVersion, tm.Kind)
		}
		obj := newObj()
		if err := decodeStrict(js, obj); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", where, tm.Kind, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// splitDocuments splits a YAML stream at its "---" separator lines, as
// kubectl does: a separator may be followed by a comment only.
func splitDocuments(data []byte) ([][]byte, error) {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "---"); ok {
			if rest = strings.TrimSpace(rest); rest != "" && !strings.HasPrefix(rest, "#") {
				return nil, fmt.Errorf("line %d: text after the document separator", n)
			}
			docs = append(docs, bytes.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return append(docs, cur.Bytes()), nil
}

// decodeStrict decodes one JSON object into obj, refusing unknown fields.
// encoding/json matches field names without regard to case, which the API
// server does not, so the keys are also compared with obj encoded back.
func decodeStrict(js []byte, obj any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the object")
	}
	canonical, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var in, out any
	if err := json.Unmarshal(js, &in); err != nil {
		return err
	}
	if err := json.Unmarshal(canonical, &out); err != nil {
		return err
	}
	return checkSpelling("", in, out)
}

// checkSpelling reports the first key of in that out, the same object
// encoded from its Go type, spells with a different case. A key missing from
// out is a zero value that the encoder omitted.
func checkSpelling(at string, in, out any) error {
	switch in := in.(type) {
	case map[string]any:
		out, _ := out.(map[string]any)
		keys := make([]string, 0, len(in))
		for k := range in {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if v, ok := out[k]; ok {
				if err := checkSpelling(at+"."+k, in[k], v); err != nil {
					return err
				}
				continue
			}
			for have := range out {
				if strings.EqualFold(have, k) {
					return fmt.Errorf("%s.%s: unknown field, the API spells it %q", at, k, have)
				}
			}
		}
	case []any:
		out, _ := out.([]any)
		for i := range min(len(in), len(out)) {
			if err := checkSpelling(fmt.Sprintf("%s[%d]", at, i), in[i], out[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// relay returns relay's container.
func (b *bundle) relay() (*container, error) {
	cs := b.deploy.Spec.Template.Spec.Containers
	for i := range cs {
		if cs[i].Name == relayContainer {
			return &cs[i], nil
		}
	}
	return nil, fmt.Errorf("Deployment %q has no container %q", b.deploy.Name, relayContainer)
}

// env resolves the environment of container c: literal values, and values
// from the Secrets and ConfigMaps of the base. A reference to a missing
// object or key is an error unless the reference is optional.
func (b *bundle) env(c *container) (map[string]string, error) {
	out := map[string]string{}
	var errs []error
	for _, from := range c.EnvFrom {
		switch {
		case from.SecretRef != nil:
			s, ok := b.secrets[from.SecretRef.Name]
			if !ok {
				if !isTrue(from.SecretRef.Optional) {
					errs = append(errs, fmt.Errorf("container %q: envFrom Secret %q is not in the build", c.Name, from.SecretRef.Name))
				}
				continue
			}
			for k, v := range secretData(s) {
				out[from.Prefix+k] = v
			}
		case from.ConfigMapRef != nil:
			cm, ok := b.configMaps[from.ConfigMapRef.Name]
			if !ok {
				if !isTrue(from.ConfigMapRef.Optional) {
					errs = append(errs, fmt.Errorf("container %q: envFrom ConfigMap %q is not in the build", c.Name, from.ConfigMapRef.Name))
				}
				continue
			}
			for k, v := range cm.Data {
				out[from.Prefix+k] = v
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := secretData(b.secrets[ref.Name])[ref.Key]
			if !ok && !isTrue(ref.Optional) {
				errs = append(errs, fmt.Errorf("container %q: env %s: Secret %q with key %q is not in the build", c.Name, e.Name, ref.Name, ref.Key))
			}
			if ok {
				out[e.Name] = v
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			var v string
			ok := false
			if cm := b.configMaps[ref.Name]; cm != nil {
				v, ok = cm.Data[ref.Key]
			}
			if !ok && !isTrue(ref.Optional) {
				errs = append(errs, fmt.Errorf("container %q: env %s: ConfigMap %q with key %q is not in the build", c.Name, e.Name, ref.Name, ref.Key))
			}
			if ok {
				out[e.Name] = v
			}
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			out[e.Name] = b.podName()
		default:
			// Other pod fields and resources are known only in the
			// cluster.
			out[e.Name] = ""
		}
	}
	return out, errors.Join(errs...)
}

// secretData merges a Secret's data and stringData as the API server does;
// a nil Secret has none.
func secretData(s *secret) map[string]string {
	out := map[string]string{}
	if s == nil {
		return out
	}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	for k, v := range s.StringData {
		out[k] = v
	}
	return out
}

// podName is the name of one of the Deployment's pods, as its ReplicaSet
// names them: what the downward API's metadata.name and the host name are.
func (b *bundle) podName() string { return b.deploy.Name + "-5d4f8b7c9d-x2x7q" }

// envSource says where container c's variable name comes from, as the
// kubelet resolves it (an env entry wins over envFrom, a later envFrom over
// an earlier one): "Secret NAME", "ConfigMap NAME", "literal" or "field";
// "" when nothing sets it.
func (b *bundle) envSource(c *container, name string) string {
	src := ""
	for _, from := range c.EnvFrom {
		switch {
		case from.SecretRef != nil:
			if _, ok := secretData(b.secrets[from.SecretRef.Name])[strings.TrimPrefix(name, from.Prefix)]; ok && strings.HasPrefix(name, from.Prefix) {
				src = "Secret " + from.SecretRef.Name
			}
		case from.ConfigMapRef != nil:
			if cm := b.configMaps[from.ConfigMapRef.Name]; cm != nil && strings.HasPrefix(name, from.Prefix) {
				if _, ok := cm.Data[strings.TrimPrefix(name, from.Prefix)]; ok {
					src = "ConfigMap " + from.ConfigMapRef.Name
				}
			}
		}
	}
	for _, e := range c.Env {
		if e.Name != name {
			continue
		}
		switch {
		case e.ValueFrom == nil:
			src = "literal"
		case e.ValueFrom.SecretKeyRef != nil:
			src = "Secret " + e.ValueFrom.SecretKeyRef.Name
		case e.ValueFrom.ConfigMapKeyRef != nil:
			src = "ConfigMap " + e.ValueFrom.ConfigMapKeyRef.Name
		default:
			src = "field"
		}
	}
	return src
}

// relayConfig loads relay's configuration from its container's environment,
// exactly as relay run would: the tenants file and the secret files it
// names are read from the volumes mounted over their directories.
func (b *bundle) relayConfig() (config.Config, map[string]string, error) {
	c, err := b.relay()
	if err != nil {
		return config.Config{}, nil, err
	}
	env, err := b.env(c)
	if err != nil {
		return config.Config{}, nil, err
	}
	cfg, err := config.LoadWith(context.Background(), envconfig.MapLookuper(env), config.Sources{
		ReadFile: func(name string) ([]byte, error) {
			data, _, err := b.mountedFile(name)
			if err != nil {
				return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
			}
			return data, nil
		},
		Hostname: func() (string, error) { return b.podName(), nil },
	})
	return cfg, env, err
}

// listenPort is the TCP port of the relay container's RELAY_LISTEN.
func (b *bundle) listenPort() (int, error) {
	cfg, _, err := b.relayConfig()
	if err != nil {
		return 0, err
	}
	return listenPort(cfg)
}

// listenPort is the TCP port of RELAY_LISTEN.
func listenPort(cfg config.Config) (int, error) {
	_, p, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return 0, fmt.Errorf("RELAY_LISTEN=%q: %w", cfg.Listen, err)
	}
	return strconv.Atoi(p)
}

// containerPort resolves a port given by number or by name on container c.
func containerPort(c *container, p string) (int, bool) {
	if n, err := strconv.Atoi(p); err == nil {
		return n, true
	}
	for _, cp := range c.Ports {
		if cp.Name == p {
			return int(cp.ContainerPort), true
		}
	}
	return 0, false
}

// mountFor returns the volume mount of c whose directory holds file.
func mountFor(c *container, file string) (*volumeMount, bool) {
	dir := path.Dir(file)
	for i := range c.VolumeMounts {
		if path.Clean(c.VolumeMounts[i].MountPath) == dir {
			return &c.VolumeMounts[i], true
		}
	}
	return nil, false
}

// volume returns the pod's volume called name.
func (b *bundle) volume(name string) (*volume, bool) {
	vs := b.deploy.Spec.Template.Spec.Volumes
	for i := range vs {
		if vs[i].Name == name {
			return &vs[i], true
		}
	}
	return nil, false
}

// mountedFile returns the file at file in relay's container, read from the
// ConfigMap or Secret volume mounted over its directory, and a name for it
// in errors ("relay-rules/rules.yaml").
func (b *bundle) mountedFile(file string) (data []byte, name string, err error) {
	c, err := b.relay()
	if err != nil {
		return nil, "", err
	}
	m, ok := mountFor(c, file)
	if !ok {
		return nil, "", fmt.Errorf("no volume is mounted at %s", path.Dir(file))
	}
	v, ok := b.volume(m.Name)
	if !ok {
		return nil, "", fmt.Errorf("volume %q is not defined", m.Name)
	}
	key := path.Base(file)
	var items []keyToPath
	var source map[string]string
	var object string
	switch {
	case v.ConfigMap != nil:
		items, object = v.ConfigMap.Items, v.ConfigMap.Name
		cm, ok := b.configMaps[object]
		if !ok {
			return nil, "", fmt.Errorf("volume %q: ConfigMap %q is not in the build", v.Name, object)
		}
		source = cm.Data
	case v.Secret != nil:
		items, object = v.Secret.Items, v.Secret.SecretName
		sec, ok := b.secrets[object]
		if !ok {
			return nil, "", fmt.Errorf("volume %q: Secret %q is not in the build", v.Name, object)
		}
		source = secretData(sec)
	default:
		return nil, "", fmt.Errorf("volume %q is neither a ConfigMap nor a Secret volume", v.Name)
	}
	for _, it := range items {
		if it.Path == key {
			key = it.Key
		}
	}
	s, ok := source[key]
	if !ok {
		return nil, "", fmt.Errorf("%s has no key %q (volume %q)", object, key, v.Name)
	}
	return []byte(s), object + "/" + key, nil
}

// readFiles are the files relay reads from mounted volumes, each with the
// variable or tenant it is read for: the tenants file and each tenant's
// rules file.
func readFiles(cfg config.Config) []struct{ file, what string } {
	var out []struct{ file, what string }
	seen := map[string]bool{}
	add := func(file, what string) {
		if !seen[file] {
			seen[file] = true
			out = append(out, struct{ file, what string }{file, what})
		}
	}
	if cfg.TenantsFile != "" {
		add(cfg.TenantsFile, "RELAY_TENANTS_FILE="+cfg.TenantsFile)
	}
	for _, t := range cfg.Tenants() {
		what := "RELAY_RULES=" + t.Rules
		if cfg.TenantsFile != "" {
			what = fmt.Sprintf("tenant %s: rules %s", t.ID, t.Rules)
		}
		add(t.Rules, what)
	}
	return out
}

func isTrue(p *bool) bool { return p != nil && *p }

func isFalse(p *bool) bool { return p != nil && !*p }

// check is one property of the base; it returns every violation it finds.
type check func(b *bundle) []error

// checks are the properties TestManifests proves, by name.
var checks = []struct {
	name  string
	check check
}{
	{"kustomization lists every manifest", checkResources},
	{"kustomization image is relay's", checkImage},
	{"RELAY_ variables are real", checkVariableNames},
	{"secrets come from Secrets", checkSecretsFromSecrets},
	{"references resolve", checkReferences},
	{"relay container security context", checkContainerSecurity},
	{"pod security context", checkPodSecurity},
	{"probes on RELAY_LISTEN", checkProbes},
	{"scrape annotations on RELAY_LISTEN", checkScrape},
	{"rules directory mounted from ConfigMap", checkRulesMount},
	{"rules file validates", checkRulesParse},
	{"state where the backend wants it", checkState},
	{"one writer of a bbolt state file", checkOneWriter},
	{"replicas of JetStream state spread and disrupted one at a time", checkReplicated},
	{"termination grace exceeds RELAY_SHUTDOWN_GRACE", checkGrace},
	{"no service account token", checkServiceAccount},
	{"network policy lets relay work", checkNetworkPolicy},
	{"Dockerfile matches the pod", checkDockerfile},
	{"base holds no Secret or ConfigMap", checkBaseHoldsNoTenantData},
	{"overlay provides the Secrets", checkOverlayProvidesSecrets},
	{"memory limit above the README's measured peak", checkMemory},
	{"startup probe outlasts a slow start", checkStartupProbe},
}

// overlays lists the overlays of the base: every folder of overlays/, and
// the replicated overlay.
func overlays(t *testing.T) []string {
	entries, err := os.ReadDir(overlaysDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(overlaysDir, e.Name()))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no overlay in %s", overlaysDir)
	}
	return append(out, haDir)
}

// TestManifests builds every overlay (the base and what the overlay adds or
// patches), decodes every manifest strictly and checks the properties
// relay's deployment depends on.
func TestManifests(t *testing.T) {
	for _, dir := range overlays(t) {
		t.Run(dir, func(t *testing.T) {
			b, err := loadBundle(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := b.layer(baseDir); !ok {
				t.Fatalf("the overlay does not build on %s", baseDir)
			}
			// The other checks read relay's configuration: without it each
			// of them would repeat the same error.
			if errs := checkEnvironmentLoads(b); len(errs) != 0 {
				t.Fatalf("relay's environment: %v", errors.Join(errs...))
			}
			for _, c := range checks {
				t.Run(c.name, func(t *testing.T) {
					for _, err := range c.check(b) {
						t.Error(err)
					}
				})
			}
		})
	}
}

// TestBase checks the base on its own: its kustomization lists every
// manifest of its folder, and it holds no Secret or ConfigMap, whose
// placeholders every overlay would otherwise apply over the real objects.
func TestBase(t *testing.T) {
	b, err := loadBundle(baseDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.layers) != 1 {
		t.Fatalf("the base builds on other kustomizations: %d layers", len(b.layers))
	}
	for _, err := range slices.Concat(checkResources(b), checkBaseHoldsNoTenantData(b)) {
		t.Error(err)
	}
}

// checkBaseHoldsNoTenantData checks that the base has no Secret and no
// ConfigMap: what they hold differs per tenant, and an overlay cannot leave
// out an object of its base, so a placeholder there would be applied over
// the overlay's or the operator's real one.
func checkBaseHoldsNoTenantData(b *bundle) []error {
	l, ok := b.layer(baseDir)
	if !ok {
		return []error{fmt.Errorf("the build does not include %s", baseDir)}
	}
	var errs []error
	for _, o := range l.objects {
		if o.kind == "Secret" || o.kind == "ConfigMap" {
			errs = append(errs, fmt.Errorf("%s: %s %q is in the base: every overlay would apply it over the real one; keep it in an overlay",
				o.file, o.kind, o.name))
		}
	}
	return errs
}

// checkOverlayProvidesSecrets checks that every Secret the Deployment uses is
// an object of the overlay, not of the base.
func checkOverlayProvidesSecrets(b *bundle) []error {
	spec := b.deploy.Spec.Template.Spec
	used := map[string]bool{}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, from := range c.EnvFrom {
			if from.SecretRef != nil {
				used[from.SecretRef.Name] = true
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				used[e.ValueFrom.SecretKeyRef.Name] = true
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			used[v.Secret.SecretName] = true
		}
	}
	if len(used) == 0 {
		return []error{fmt.Errorf("Deployment %q uses no Secret: where do relay's credentials come from?", b.deploy.Name)}
	}
	provided := map[string]bool{}
	for _, l := range b.layers {
		for _, o := range l.objects {
			if o.kind == "Secret" && l.dir != filepath.Clean(baseDir) {
				provided[o.name] = true
			}
		}
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(used)) {
		if !provided[name] {
			errs = append(errs, fmt.Errorf("Secret %q, which Deployment %q uses, is not an object of the overlay", name, b.deploy.Name))
		}
	}
	return errs
}

// checkMemory checks relay's memory limit against the README: it must be
// memoryHeadroom above the peak resident memory the README's Performance
// section measured (P6), be the limit the README's Kubernetes section states,
// and exceed GOMEMLIMIT.
func checkMemory(b *bundle) []error {
	c, err := b.relay()
	if err != nil {
		return []error{err}
	}
	lim, ok := c.Resources.Limits[resourceMemory]
	if !ok {
		return []error{fmt.Errorf("container %q: no memory limit", c.Name)}
	}
	limit := float64(lim.Value()) / (1 << 20)
	var errs []error
	peak, err := readmeFigure(b.readme, "| P6 |", `peak (\d+(?:\.\d+)?) MiB`)
	if err != nil {
		errs = append(errs, err)
	} else if limit < peak*memoryHeadroom {
		errs = append(errs, fmt.Errorf("container %q: limits.memory %s is not %.0f%% above the peak of %.1f MiB the README measured (P6)",
			c.Name, lim.String(), (memoryHeadroom-1)*100, peak))
	}
	stated, err := readmeFigure(b.readme, "- **Resources.**", `is limited to \S+ CPU and (\d+) MiB`)
	if err != nil {
		errs = append(errs, err)
	} else if stated != limit {
		errs = append(errs, fmt.Errorf("README.md says relay is limited to %g MiB, container %q to %s", stated, c.Name, lim.String()))
	}
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		if n, err := parseBytes(e.Value); err != nil {
			errs = append(errs, fmt.Errorf("container %q: GOMEMLIMIT=%q: %w", c.Name, e.Value, err))
		} else if float64(n) >= lim.AsApproximateFloat64() {
			errs = append(errs, fmt.Errorf("container %q: GOMEMLIMIT=%s is not below limits.memory %s", c.Name, e.Value, lim.String()))
		}
	}
	return errs
}

// readmeFigure returns the number pattern captures on the README's line that
// starts with prefix.
func readmeFigure(readme []byte, prefix, pattern string) (float64, error) {
	re := regexp.MustCompile(pattern)
	for line := range strings.Lines(string(readme)) {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			return 0, fmt.Errorf("README.md: the line starting %q does not match %s", prefix, pattern)
		}
		return strconv.ParseFloat(m[1], 64)
	}
	return 0, fmt.Errorf("README.md: no line starts with %q", prefix)
}

// parseBytes reads a size as GOMEMLIMIT writes it: a number of bytes with an
// optional B, KiB, MiB, GiB or TiB suffix.
func parseBytes(s string) (int64, error) {
	for i, unit := range []string{"TiB", "GiB", "MiB", "KiB", "B"} {
		if num, ok := strings.CutSuffix(s, unit); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			return n << (10 * (4 - i)), err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// checkStartupProbe checks that relay has a startup probe on /healthz whose
// window (initial delay plus period times failures) is at least
// minStartupWindow and longer than the liveness probe's: the liveness probe
// then never kills a relay that is still opening a large state file.
func checkStartupProbe(b *bundle) []error {
	port, err := b.listenPort()
	if err != nil {
		return []error{err}
	}
	c, _ := b.relay()
	p := c.StartupProbe
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		return []error{fmt.Errorf("container %q: want a startupProbe with httpGet /healthz", c.Name)}
	}
	var errs []error
	if got, ok := containerPort(c, p.HTTPGet.Port.String()); !ok || got != port {
		errs = append(errs, fmt.Errorf("container %q: startupProbe: port %s is not RELAY_LISTEN's port %d", c.Name, p.HTTPGet.Port.String(), port))
	}
	if w := probeWindow(p); w < minStartupWindow {
		errs = append(errs, fmt.Errorf("container %q: startupProbe allows %s to start, shorter than %s", c.Name, w, minStartupWindow))
	}
	if c.LivenessProbe != nil && probeWindow(p) <= probeWindow(c.LivenessProbe) {
		errs = append(errs, fmt.Errorf("container %q: startupProbe allows %s, no longer than the livenessProbe's %s", c.Name,
			probeWindow(p), probeWindow(c.LivenessProbe)))
	}
	return errs
}

// probeWindow is how long p lets a container fail before the kubelet acts,
// with the API's defaults (period 10 s, 3 failures).
func probeWindow(p *probe) time.Duration {
	period, failures := p.PeriodSeconds, p.FailureThreshold
	if period == 0 {
		period = 10
	}
	if failures == 0 {
		failures = 3
	}
	return time.Duration(p.InitialDelaySeconds+period*failures) * time.Second
}

func checkResources(b *bundle) []error {
	var errs []error
	for _, l := range b.layers {
		where := filepath.Join(l.dir, "kustomization.yaml")
		listed := map[string]bool{}
		for _, r := range l.kust.Resources {
			if listed[r] {
				errs = append(errs, fmt.Errorf("%s: resource %s is listed twice", where, r))
			}
			listed[r] = true
			if !slices.Contains(l.files, r) && !slices.Contains(l.dirs, r) {
				errs = append(errs, fmt.Errorf("%s: resource %s is not a manifest in this folder nor a folder with a kustomization", where, r))
			}
			if slices.Contains(l.patches, r) {
				errs = append(errs, fmt.Errorf("%s: %s is listed both in resources and in patches", where, r))
			}
		}
		for _, f := range l.files {
			if !listed[f] && !slices.Contains(l.patches, f) {
				errs = append(errs, fmt.Errorf("%s: %s is not listed in resources", where, f))
			}
		}
	}
	return errs
}

func checkImage(b *bundle) []error {
	c, err := b.relay()
	if err != nil {
		return []error{err}
	}
	name := c.Image
	if i := strings.LastIndex(name, "@"); i >= 0 {
		name = name[:i]
	} else if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	for _, l := range b.layers {
		for _, im := range l.kust.Images {
			if im.Name == name {
				return nil
			}
		}
	}
	return []error{fmt.Errorf("no kustomization of the build has an images entry named %q, relay's image", name)}
}

func checkVariableNames(b *bundle) []error {
	var errs []error
	known := func(where, name string) {
		if strings.HasPrefix(name, "RELAY_") && !slices.Contains(config.Variables, name) {
			errs = append(errs, fmt.Errorf("%s: %s is not a variable relay reads (internal/config.Variables)", where, name))
		}
	}
	spec := b.deploy.Spec.Template.Spec
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		env, _ := b.env(&c)
		for name := range env {
			known(fmt.Sprintf("Deployment %q container %q", b.deploy.Name, c.Name), name)
		}
	}
	for _, s := range b.secrets {
		for k := range secretData(s) {
			known(fmt.Sprintf("Secret %q", s.Name), k)
		}
	}
	for _, cm := range b.configMaps {
		for k := range cm.Data {
			known(fmt.Sprintf("ConfigMap %q", cm.Name), k)
		}
	}
	return errs
}

func checkSecretsFromSecrets(b *bundle) []error {
	var errs []error
	spec := b.deploy.Spec.Template.Spec
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, e := range c.Env {
			if e.ValueFrom == nil && slices.Contains(secretVariables, e.Name) {
				errs = append(errs, fmt.Errorf("container %q: %s is written as a literal: take it from a Secret with secretKeyRef", c.Name, e.Name))
			}
		}
	}
	for _, cm := range b.configMaps {
		for k := range cm.Data {
			if slices.Contains(secretVariables, k) {
				errs = append(errs, fmt.Errorf("ConfigMap %q holds %s: secrets belong in a Secret", cm.Name, k))
			}
		}
	}
	// Each tenant's app secret: a variable or a mounted file of a Secret.
	cfg, _, err := b.relayConfig()
	if err != nil {
		return append(errs, err)
	}
	c, _ := b.relay()
	for _, t := range cfg.Tenants() {
		kind, from, _ := strings.Cut(t.SecretFrom, " ")
		switch kind {
		case "app_secret_file":
			m, ok := mountFor(c, from)
			if v, _ := b.volume(m.Name); !ok || v == nil || v.Secret == nil {
				errs = append(errs, fmt.Errorf("tenant %s: app_secret_file %s is not in a Secret volume", t.ID, from))
			}
		case "app_secret_env", "RELAY_APP_SECRET":
			name := cmp.Or(from, kind)
			if src := b.envSource(c, name); !strings.HasPrefix(src, "Secret ") {
				errs = append(errs, fmt.Errorf("tenant %s: its app secret %s comes from %s, want a Secret", t.ID, name, cmp.Or(src, "nowhere")))
			}
		}
	}
	return errs
}

func checkReferences(b *bundle) []error {
	var errs []error
	spec := b.deploy.Spec.Template.Spec
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		if _, err := b.env(&c); err != nil {
			errs = append(errs, err)
		}
		for _, m := range c.VolumeMounts {
			if _, ok := b.volume(m.Name); !ok {
				errs = append(errs, fmt.Errorf("container %q mounts volume %q, which the pod does not define", c.Name, m.Name))
			}
		}
	}
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil && b.configMaps[v.ConfigMap.Name] == nil && !isTrue(v.ConfigMap.Optional):
			errs = append(errs, fmt.Errorf("volume %q: ConfigMap %q is not in the build", v.Name, v.ConfigMap.Name))
		case v.Secret != nil && b.secrets[v.Secret.SecretName] == nil && !isTrue(v.Secret.Optional):
			errs = append(errs, fmt.Errorf("volume %q: Secret %q is not in the build", v.Name, v.Secret.SecretName))
		case v.PersistentVolumeClaim != nil && b.claims[v.PersistentVolumeClaim.ClaimName] == nil:
			errs = append(errs, fmt.Errorf("volume %q: PersistentVolumeClaim %q is not in the build", v.Name, v.PersistentVolumeClaim.ClaimName))
		}
	}
	if sa := spec.ServiceAccountName; sa != "" && b.accounts[sa] == nil {
		errs = append(errs, fmt.Errorf("Deployment %q: ServiceAccount %q is not in the build", b.deploy.Name, sa))
	}
	return errs
}

func checkEnvironmentLoads(b *bundle) []error {
	cfg, _, err := b.relayConfig()
	if err != nil {
		return []error{err}
	}
	if err := cfg.RequireUpstream(); err != nil {
		return []error{err}
	}
	return nil
}

func checkContainerSecurity(b *bundle) []error {
	c, err := b.relay()
	if err != nil {
		return []error{err}
	}
	sc := c.SecurityContext
	if sc == nil {
		return []error{fmt.Errorf("container %q has no securityContext", c.Name)}
	}
	var errs []error
	want := func(ok bool, what string) {
		if !ok {
			errs = append(errs, fmt.Errorf("container %q: securityContext: want %s", c.Name, what))
		}
	}
	want(isTrue(sc.RunAsNonRoot), "runAsNonRoot: true")
	want(sc.RunAsUser != nil && *sc.RunAsUser == nonRootID, fmt.Sprintf("runAsUser: %d", nonRootID))
	want(sc.RunAsGroup != nil && *sc.RunAsGroup == nonRootID, fmt.Sprintf("runAsGroup: %d", nonRootID))
	want(isTrue(sc.ReadOnlyRootFilesystem), "readOnlyRootFilesystem: true")
	want(isFalse(sc.AllowPrivilegeEscalation), "allowPrivilegeEscalation: false")
	want(!isTrue(sc.Privileged), "privileged unset or false")
	want(sc.Capabilities != nil && slices.Contains(sc.Capabilities.Drop, "ALL") && len(sc.Capabilities.Add) == 0,
		"capabilities: drop [ALL] and add none")
	want(sc.SeccompProfile != nil && sc.SeccompProfile.Type == seccompRuntimeDefault,
		"seccompProfile: type RuntimeDefault")
	return errs
}

func checkPodSecurity(b *bundle) []error {
	spec := b.deploy.Spec.Template.Spec
	sc := spec.SecurityContext
	if sc == nil {
		return []error{fmt.Errorf("Deployment %q: pod has no securityContext", b.deploy.Name)}
	}
	var errs []error
	want := func(ok bool, what string) {
		if !ok {
			errs = append(errs, fmt.Errorf("Deployment %q: pod securityContext: want %s", b.deploy.Name, what))
		}
	}
	want(isTrue(sc.RunAsNonRoot), "runAsNonRoot: true")
	want(sc.RunAsUser != nil && *sc.RunAsUser == nonRootID, fmt.Sprintf("runAsUser: %d", nonRootID))
	want(sc.RunAsGroup != nil && *sc.RunAsGroup == nonRootID, fmt.Sprintf("runAsGroup: %d", nonRootID))
	want(sc.FSGroup != nil && *sc.FSGroup == nonRootID, fmt.Sprintf("fsGroup: %d (the state volume must be writable)", nonRootID))
	want(sc.SeccompProfile != nil && sc.SeccompProfile.Type == seccompRuntimeDefault,
		"seccompProfile: type RuntimeDefault")
	// Every container of the pod, the example application included, must
	// pass the restricted Pod Security Standard, or the pod is refused in a
	// namespace that enforces it.
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		csc := c.SecurityContext
		if csc == nil || !isFalse(csc.AllowPrivilegeEscalation) || csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") {
			errs = append(errs, fmt.Errorf("container %q: securityContext: want allowPrivilegeEscalation: false and capabilities: drop [ALL]", c.Name))
		}
	}
	return errs
}

func checkProbes(b *bundle) []error {
	port, err := b.listenPort()
	if err != nil {
		return []error{err}
	}
	c, _ := b.relay()
	var errs []error
	for _, p := range []struct {
		kind  string
		probe *probe
		path  string
	}{
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			errs = append(errs, fmt.Errorf("container %q: %s: want httpGet %s", c.Name, p.kind, p.path))
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path {
			errs = append(errs, fmt.Errorf("container %q: %s: path %q, want %q", c.Name, p.kind, g.Path, p.path))
		}
		if got, ok := containerPort(c, g.Port.String()); !ok || got != port {
			errs = append(errs, fmt.Errorf("container %q: %s: port %s is not RELAY_LISTEN's port %d", c.Name, p.kind, g.Port.String(), port))
		}
	}
	if got, ok := containerPort(c, "metrics"); !ok || got != port {
		errs = append(errs, fmt.Errorf("container %q: want a port named metrics on RELAY_LISTEN's port %d", c.Name, port))
	}
	return append(errs, checkProbeScheme(b)...)
}

// checkProbeScheme checks that relay's probes ask over HTTPS when its ops
// listener serves TLS (RELAY_TLS_CERT_FILE), and over HTTP otherwise: the
// kubelet would fail every probe of the other scheme.
func checkProbeScheme(b *bundle) []error {
	cfg, _, err := b.relayConfig()
	if err != nil {
		return []error{err}
	}
	want := "HTTP"
	if cfg.TLS.CertFile != "" {
		want = "HTTPS"
	}
	c, _ := b.relay()
	var errs []error
	for _, p := range []struct {
		kind  string
		probe *probe
	}{{"startupProbe", c.StartupProbe}, {"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			continue
		}
		if got := cmp.Or(p.probe.HTTPGet.Scheme, "HTTP"); got != want {
			errs = append(errs, fmt.Errorf("container %q: %s: scheme %s, want %s: RELAY_TLS_CERT_FILE is %q", c.Name, p.kind, got, want, cfg.TLS.CertFile))
		}
	}
	return errs
}

func checkScrape(b *bundle) []error {
	port, err := b.listenPort()
	if err != nil {
		return []error{err}
	}
	a := b.deploy.Spec.Template.Annotations
	var errs []error
	for k, want := range map[string]string{
		"prometheus.io/scrape": "true",
		"prometheus.io/port":   strconv.Itoa(port),
		"prometheus.io/path":   "/metrics",
	} {
		if a[k] != want {
			errs = append(errs, fmt.Errorf("pod annotation %s is %q, want %q", k, a[k], want))
		}
	}
	return errs
}

// checkRulesMount checks that the tenants file and every tenant's rules
// file are read from a ConfigMap mounted as a whole directory: a subPath
// mount never receives the ConfigMap's updates.
func checkRulesMount(b *bundle) []error {
	cfg, _, err := b.relayConfig()
	if err != nil {
		return []error{err}
	}
	c, _ := b.relay()
	var errs []error
	for _, f := range readFiles(cfg) {
		if _, _, err := b.mountedFile(f.file); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.what, err))
			continue
		}
		m, _ := mountFor(c, f.file)
		if v, _ := b.volume(m.Name); v.ConfigMap == nil {
			errs = append(errs, fmt.Errorf("%s: volume %q is not a ConfigMap volume", f.what, m.Name))
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			errs = append(errs, fmt.Errorf("container %q: mount %q uses subPath: ConfigMap updates never reach a subPath mount, so rules would not reload", c.Name, m.Name))
		}
	}
	return errs
}

// checkRulesParse checks that every tenant's rules file validates with the
// container's environment.
func checkRulesParse(b *bundle) []error {
	cfg, env, err := b.relayConfig()
	if err != nil {
		return []error{err}
	}
	lookup := func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
	var errs []error
	for _, f := range readFiles(cfg) {
		if f.file == cfg.TenantsFile {
			continue
		}
		data, name, err := b.mountedFile(f.file)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.what, err))
			continue
		}
		if _, err := route.Parse(name, data, lookup); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// checkState checks where each tenant's state file lives: on a writable
// PersistentVolumeClaim with bbolt, which must outlive the pod; with
// jetstream, where it is a disposable cache, on a writable volume that is
// not a claim, with no claim left in the build (a ReadWriteOnce claim would
// hold every replica on one node).
func checkState(b *bundle) []error {
	cfg, _, err := b.relayConfig()
	if err != nil {
		return []error{err}
	}
	c, _ := b.relay()
	jetstream := cfg.Store.Backend == config.BackendJetStream
	var errs []error
	dirs := map[string]string{path.Dir(cfg.Store.Path): "RELAY_STATE_PATH=" + cfg.Store.Path}
	for _, t := range cfg.Tenants() {
		if _, ok := dirs[path.Dir(t.StatePath)]; !ok {
			dirs[path.Dir(t.StatePath)] = fmt.Sprintf("tenant %s: state %s", t.ID, t.StatePath)
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		what := dirs[dir]
		m, ok := mountFor(c, path.Join(dir, "state"))
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no volume is mounted at %s", what, dir))
			continue
		}
		if m.ReadOnly {
			errs = append(errs, fmt.Errorf("%s: mount %q is read-only", what, m.Name))
		}
		v, ok := b.volume(m.Name)
		switch {
		case !ok:
		case jetstream && v.PersistentVolumeClaim != nil:
			errs = append(errs, fmt.Errorf("%s: volume %q is a PersistentVolumeClaim: with RELAY_STATE_BACKEND=jetstream the state is in JetStream; use an emptyDir for the caches", what, m.Name))
		case !jetstream && v.PersistentVolumeClaim == nil:
			errs = append(errs, fmt.Errorf("%s: volume %q is not a PersistentVolumeClaim: the state would not survive the pod", what, m.Name))
		}
	}
	if jetstream {
		for _, name := range slices.Sorted(maps.Keys(b.claims)) {
			errs = append(errs, fmt.Errorf("PersistentVolumeClaim %q is in the build: with RELAY_STATE_BACKEND=jetstream no pod needs a volume; delete it with a $patch: delete", name))
		}
	}
	return errs
}

// checkOneWriter checks that a bbolt state file has one writer: one replica,
// replaced with Recreate.
func checkOneWriter(b *bundle) []error {
	cfg, _, err := b.relayConfig()
	if err != nil {
		return []error{err}
	}
	if cfg.Store.Backend != config.BackendBBolt {
		return nil
	}
	var errs []error
	if r := b.deploy.Spec.Replicas; r == nil || *r != 1 {
		errs = append(errs, fmt.Errorf("Deployment %q: want replicas: 1, one writer of the state file", b.deploy.Name))
	}
	if s := b.deploy.Spec.Strategy.Type; s != strategyRecreate {
		errs = append(errs, fmt.Errorf("Deployment %q: strategy %q, want Recreate: a rolling update starts a second writer of the state file", b.deploy.Name, s))
	}
	return errs
}

// checkReplicated checks that JetStream state is served by replicas that
// survive the loss of one: at least two pods, the state on at least three
// JetStream servers, at most one pod down in a rolling update and in a
// voluntary disruption, the pods spread over nodes, each with its pod's name
// as its replica id, and the NATS connection from a Secret.
func checkReplicated(b *bundle) []error {
	cfg, _, err := b.relayConfig()
	if err != nil {
		return []error{err}
	}
	if cfg.Store.Backend != config.BackendJetStream {
		return nil
	}
	d := b.deploy
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	replicas := 1
	if d.Spec.Replicas != nil {
		replicas = int(*d.Spec.Replicas)
	}
	if replicas < 2 {
		bad("Deployment %q: replicas: %d, want at least 2, so that one takes over the tenants of another", d.Name, replicas)
	}
	if cfg.Store.Replicas < minStateReplicas {
		bad("RELAY_STATE_REPLICAS=%d: want at least %d, so that the state survives the loss of a JetStream server", cfg.Store.Replicas, minStateReplicas)
	}
	st := d.Spec.Strategy
	if st.Type != strategyRollingUpdate {
		bad("Deployment %q: strategy %q, want RollingUpdate: with no volume to hand over, Recreate would stop every replica at once", d.Name, st.Type)
	} else {
		// The API's default is 25%, rounded down.
		mu := parseIntOrString("25%")
		if st.RollingUpdate != nil && st.RollingUpdate.MaxUnavailable != nil {
			mu = *st.RollingUpdate.MaxUnavailable
		}
		if n, err := scaledValue(&mu, replicas, false); err != nil || n > 1 {
			bad("Deployment %q: rollingUpdate.maxUnavailable %s, want at most one pod down", d.Name, mu.String())
		}
	}
	labels := d.Spec.Template.Labels
	budgets := 0
	for _, pdb := range b.budgets {
		sel := pdb.Spec.Selector
		if sel == nil || len(sel.MatchExpressions) > 0 || len(sel.MatchLabels) == 0 || !selects(sel.MatchLabels, labels) {
			continue
		}
		budgets++
		switch sp := pdb.Spec; {
		case sp.MaxUnavailable != nil:
			// A percentage of maxUnavailable is rounded up.
			if n, err := scaledValue(sp.MaxUnavailable, replicas, true); err != nil || n > 1 {
				bad("PodDisruptionBudget %q: maxUnavailable %s, want 1: a drain must take one replica at a time", pdb.Name, sp.MaxUnavailable.String())
			}
		case sp.MinAvailable != nil:
			if n, err := scaledValue(sp.MinAvailable, replicas, true); err != nil || n < replicas-1 {
				bad("PodDisruptionBudget %q: minAvailable %s, want %d: a drain must take one replica at a time", pdb.Name, sp.MinAvailable.String(), replicas-1)
			}
		default:
			bad("PodDisruptionBudget %q: want maxUnavailable: 1", pdb.Name)
		}
	}
	if budgets == 0 {
		bad("no PodDisruptionBudget selects the pod's labels %v with matchLabels: a drain could evict every replica at once", labels)
	}
	if !spreadOverNodes(d.Spec.Template.Spec.Affinity, labels) {
		bad("Deployment %q: want a podAntiAffinity term (required or preferred) with topologyKey %s selecting the pod's labels, so that one node lost takes one replica", d.Name, hostnameKey)
	}
	c, _ := b.relay()
	if src := b.envSource(c, "RELAY_REPLICA_ID"); src != "field" || !slices.ContainsFunc(c.Env, func(e envVar) bool {
		return e.Name == "RELAY_REPLICA_ID" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}) {
		bad("container %q: RELAY_REPLICA_ID comes from %s, want the pod's name (valueFrom.fieldRef.fieldPath: metadata.name), unique among the replicas", c.Name, cmp.Or(src, "nowhere"))
	}
	for _, name := range []string{"RELAY_NATS_URL", "RELAY_NATS_USER", "RELAY_NATS_PASSWORD", "RELAY_NATS_TOKEN"} {
		if src := b.envSource(c, name); src != "" && !strings.HasPrefix(src, "Secret ") {
			bad("container %q: %s comes from %s, want a Secret: the NATS connection holds the replicas' state", c.Name, name, src)
		}
	}
	return errs
}

// spreadOverNodes reports whether affinity keeps pods labelled labels off
// each other's nodes, as a requirement or a preference.
func spreadOverNodes(a *affinity, labels map[string]string) bool {
	if a == nil || a.PodAntiAffinity == nil {
		return false
	}
	terms := slices.Clone(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		terms = append(terms, w.PodAffinityTerm)
	}
	for _, t := range terms {
		if t.TopologyKey == hostnameKey && t.LabelSelector != nil && len(t.LabelSelector.MatchExpressions) == 0 &&
			len(t.LabelSelector.MatchLabels) > 0 && selects(t.LabelSelector.MatchLabels, labels) {
			return true
		}
	}
	return false
}

func checkGrace(b *bundle) []error {
	cfg, _, err := b.relayConfig()
	if err != nil {
		return []error{err}
	}
	g := b.deploy.Spec.Template.Spec.TerminationGracePeriodSeconds
	if g == nil || *g <= int64(cfg.Grace.Seconds()) {
		return []error{fmt.Errorf("Deployment %q: terminationGracePeriodSeconds must exceed RELAY_SHUTDOWN_GRACE=%s, or the kubelet kills relay mid-drain", b.deploy.Name, cfg.Grace)}
	}
	return nil
}

func checkServiceAccount(b *bundle) []error {
	spec := b.deploy.Spec.Template.Spec
	var errs []error
	if !isFalse(spec.AutomountServiceAccountToken) {
		errs = append(errs, fmt.Errorf("Deployment %q: want automountServiceAccountToken: false", b.deploy.Name))
	}
	if sa := b.accounts[spec.ServiceAccountName]; sa == nil || !isFalse(sa.AutomountServiceAccountToken) {
		errs = append(errs, fmt.Errorf("ServiceAccount %q: want one in the base with automountServiceAccountToken: false", spec.ServiceAccountName))
	}
	return errs
}

// checkNetworkPolicy checks that a policy selects the pod and opens the
// ports relay uses: its listen port for scraping, DNS, HTTPS, and the port
// of RELAY_NATS_URL.
func checkNetworkPolicy(b *bundle) []error {
	cfg, _, err := b.relayConfig()
	if err != nil {
		return []error{err}
	}
	listen, err := listenPort(cfg)
	if err != nil {
		return []error{err}
	}
	c, _ := b.relay()
	labels := b.deploy.Spec.Template.Labels
	var selecting []*networkPolicy
	for _, p := range b.policies {
		if len(p.Spec.PodSelector.MatchExpressions) > 0 {
			return []error{fmt.Errorf("NetworkPolicy %q: matchExpressions are beyond this test: select with matchLabels", p.Name)}
		}
		if selects(p.Spec.PodSelector.MatchLabels, labels) {
			selecting = append(selecting, p)
		}
	}
	if len(selecting) == 0 {
		return []error{fmt.Errorf("no NetworkPolicy selects the pod's labels %v", labels)}
	}
	type want struct {
		egress bool
		proto  string
		port   int
		why    string
	}
	wants := []want{
		{false, protocolTCP, listen, "metrics scraping"},
		{true, protocolUDP, 53, "DNS"},
		{true, protocolTCP, 53, "DNS"},
		{true, protocolTCP, 443, "the Open Data Service and Slack"},
	}
	if cfg.NATS.URL != "" {
		for _, s := range strings.Split(cfg.NATS.URL, ",") {
			u, err := url.Parse(strings.TrimSpace(s))
			if err != nil {
				return []error{fmt.Errorf("RELAY_NATS_URL: %w", err)}
			}
			p := 4222
			if u.Port() != "" {
				if p, err = strconv.Atoi(u.Port()); err != nil {
					return []error{fmt.Errorf("RELAY_NATS_URL: port %q: %w", u.Port(), err)}
				}
			}
			wants = append(wants, want{true, protocolTCP, p, "NATS"})
		}
	}
	var errs []error
	for _, w := range wants {
		if !allows(selecting, c, w.egress, w.proto, w.port) {
			dir := "ingress"
			if w.egress {
				dir = "egress"
			}
			errs = append(errs, fmt.Errorf("no NetworkPolicy selecting the pod allows %s %d/%s (%s)", dir, w.port, w.proto, w.why))
		}
	}
	return errs
}

// selects reports whether matchLabels select a pod labelled labels.
func selects(matchLabels, labels map[string]string) bool {
	for k, v := range matchLabels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// allows reports whether one of the policies lets traffic of proto to port
// in (or out, when egress) of the pod, from or to anywhere its rule names.
func allows(policies []*networkPolicy, c *container, egress bool, proto string, port int) bool {
	match := func(ports []networkPolicyPort) bool {
		if len(ports) == 0 {
			return true
		}
		for _, p := range ports {
			pp := protocolTCP
			if p.Protocol != nil {
				pp = *p.Protocol
			}
			if pp != proto {
				continue
			}
			if p.Port == nil {
				return true
			}
			lo, ok := containerPort(c, p.Port.String())
			if !ok {
				continue
			}
			hi := lo
			if p.EndPort != nil {
				hi = int(*p.EndPort)
			}
			if lo <= port && port <= hi {
				return true
			}
		}
		return false
	}
	for _, pol := range policies {
		if egress {
			for _, r := range pol.Spec.Egress {
				if match(r.Ports) {
					return true
				}
			}
			continue
		}
		for _, r := range pol.Spec.Ingress {
			if match(r.Ports) {
				return true
			}
		}
	}
	return false
}

// checkDockerfile checks that the image runs as the user the pod expects and
// exposes RELAY_LISTEN's port.
func checkDockerfile(b *bundle) []error {
	port, err := b.listenPort()
	if err != nil {
		return []error{err}
	}
	var user string
	var exposed []string
	for line := range strings.Lines(string(b.dockerfile)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			user, exposed = "", nil // only the final stage counts
		case "USER":
			user = f[1]
		case "EXPOSE":
			exposed = append(exposed, f[1:]...)
		}
	}
	var errs []error
	if want := fmt.Sprintf("%d:%d", nonRootID, nonRootID); user != want {
		errs = append(errs, fmt.Errorf("Dockerfile: final stage USER %q, want %q as the pod's runAsUser and runAsGroup", user, want))
	}
	if !slices.Contains(exposed, strconv.Itoa(port)) && !slices.Contains(exposed, fmt.Sprintf("%d/tcp", port)) {
		errs = append(errs, fmt.Errorf("Dockerfile: final stage EXPOSE %v lacks RELAY_LISTEN's port %d", exposed, port))
	}
	return errs
}

// TestChecksCatch proves that each check fails on the example overlay broken
// the way it guards against.
func TestChecksCatch(t *testing.T) {
	relay := func(b *bundle) *container {
		c, err := b.relay()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	layer := func(b *bundle, dir string) *layer {
		l, ok := b.layer(dir)
		if !ok {
			t.Fatalf("the build has no layer %s", dir)
		}
		return l
	}
	setEnv := func(b *bundle, name, value string) {
		c := relay(b)
		for i := range c.Env {
			if c.Env[i].Name == name {
				c.Env[i] = envVar{Name: name, Value: value}
				return
			}
		}
		c.Env = append(c.Env, envVar{Name: name, Value: value})
	}
	tests := []struct {
		name   string
		mutate func(b *bundle)
		check  check
		want   string
	}{
		{"a manifest left out of the base's kustomization", func(b *bundle) {
			l := layer(b, baseDir)
			l.kust.Resources = l.kust.Resources[1:]
		}, checkResources, "is not listed in resources"},
		{"a manifest left out of the overlay's kustomization", func(b *bundle) {
			l := layer(b, exampleDir)
			l.kust.Resources = slices.DeleteFunc(l.kust.Resources, func(r string) bool { return r == "secret.example.yaml" })
		}, checkResources, "secret.example.yaml is not listed in resources"},
		{"a resource that is not in the folder", func(b *bundle) {
			l := layer(b, baseDir)
			l.kust.Resources = append(l.kust.Resources, "service.yaml")
		}, checkResources, "service.yaml is not a manifest"},
		{"the placeholder Secret in the base", func(b *bundle) {
			l := layer(b, baseDir)
			l.objects = append(l.objects, object{"base/secret.example.yaml", "Secret", "relay-credentials"})
		}, checkBaseHoldsNoTenantData, `Secret "relay-credentials" is in the base`},
		{"the example rules in the base", func(b *bundle) {
			l := layer(b, baseDir)
			l.objects = append(l.objects, object{"base/configmap-rules.yaml", "ConfigMap", "relay-rules"})
		}, checkBaseHoldsNoTenantData, `ConfigMap "relay-rules" is in the base`},
		{"the Secret provided by the base only", func(b *bundle) {
			from, to := layer(b, exampleDir), layer(b, baseDir)
			for i, o := range from.objects {
				if o.kind == "Secret" {
					to.objects = append(to.objects, o)
					from.objects = slices.Delete(from.objects, i, i+1)
					break
				}
			}
		}, checkOverlayProvidesSecrets, `Secret "relay-credentials", which Deployment "example-app" uses, is not an object of the overlay`},
		{"a memory limit at the README's peak", func(b *bundle) {
			relay(b).Resources.Limits[resourceMemory] = quantity{text: "57Mi", milli: (57 << 20) * 1000}
		}, checkMemory, "above the peak of 57.0 MiB"},
		{"a README that states another limit", func(b *bundle) {
			b.readme = bytes.Replace(b.readme, []byte("CPU and 256 MiB"), []byte("CPU and 128 MiB"), 1)
		}, checkMemory, "README.md says relay is limited to 128 MiB"},
		{"a README without the measured peak", func(b *bundle) {
			b.readme = bytes.Replace(b.readme, []byte("| P6 |"), []byte("| P6b |"), 1)
		}, checkMemory, `no line starts with "| P6 |"`},
		{"GOMEMLIMIT above the limit", func(b *bundle) {
			setEnv(b, "GOMEMLIMIT", "300MiB")
		}, checkMemory, "GOMEMLIMIT=300MiB is not below"},
		{"no startup probe", func(b *bundle) {
			relay(b).StartupProbe = nil
		}, checkStartupProbe, "want a startupProbe"},
		{"a startup probe as short as the liveness probe", func(b *bundle) {
			p := relay(b).StartupProbe
			p.PeriodSeconds, p.FailureThreshold = 10, 3
		}, checkStartupProbe, "no longer than the livenessProbe's 30s"},
		{"an image override for another image", func(b *bundle) {
			relay(b).Image = "registry.example.com/other:v1"
		}, checkImage, `images entry named "registry.example.com/other"`},
		{"a misspelt variable", func(b *bundle) {
			setEnv(b, "RELAY_STATE_FILE", "/var/lib/relay/relay.db")
		}, checkVariableNames, "RELAY_STATE_FILE is not a variable"},
		{"a misspelt key in the Secret", func(b *bundle) {
			b.secrets["relay-credentials"].StringData["RELAY_APPID"] = "x"
		}, checkVariableNames, "RELAY_APPID is not a variable"},
		{"the app secret as a literal", func(b *bundle) {
			setEnv(b, "RELAY_APP_SECRET", "s3cret")
		}, checkSecretsFromSecrets, "RELAY_APP_SECRET is written as a literal"},
		{"a Secret that does not exist", func(b *bundle) {
			delete(b.secrets, "relay-credentials")
		}, checkReferences, `envFrom Secret "relay-credentials" is not in the build`},
		{"a settings ConfigMap that does not exist", func(b *bundle) {
			delete(b.configMaps, "relay-settings")
		}, checkReferences, `envFrom ConfigMap "relay-settings" is not in the build`},
		{"a claim that does not exist", func(b *bundle) {
			delete(b.claims, "relay-state")
		}, checkReferences, `PersistentVolumeClaim "relay-state" is not in the build`},
		{"a malformed duration", func(b *bundle) {
			setEnv(b, "RELAY_SHUTDOWN_GRACE", "20")
		}, checkEnvironmentLoads, "RELAY_SHUTDOWN_GRACE is malformed"},
		{"a writable root filesystem", func(b *bundle) {
			f := false
			relay(b).SecurityContext.ReadOnlyRootFilesystem = &f
		}, checkContainerSecurity, "readOnlyRootFilesystem: true"},
		{"capabilities kept", func(b *bundle) {
			relay(b).SecurityContext.Capabilities = nil
		}, checkContainerSecurity, "drop [ALL]"},
		{"no fsGroup", func(b *bundle) {
			b.deploy.Spec.Template.Spec.SecurityContext.FSGroup = nil
		}, checkPodSecurity, "fsGroup"},
		{"a readiness probe on the wrong path", func(b *bundle) {
			relay(b).ReadinessProbe.HTTPGet.Path = "/healthz"
		}, checkProbes, `path "/healthz", want "/readyz"`},
		{"TLS on the ops listener with HTTP probes", func(b *bundle) {
			setEnv(b, "RELAY_TLS_CERT_FILE", "/etc/relay-tls/tls.crt")
			setEnv(b, "RELAY_TLS_KEY_FILE", "/etc/relay-tls/tls.key")
		}, checkProbes, "scheme HTTP, want HTTPS"},
		{"relay listening on another port", func(b *bundle) {
			setEnv(b, "RELAY_LISTEN", ":9090")
		}, checkProbes, "is not RELAY_LISTEN's port 9090"},
		{"a scrape annotation on another port", func(b *bundle) {
			b.deploy.Spec.Template.Annotations["prometheus.io/port"] = "8080"
		}, checkScrape, "prometheus.io/port"},
		{"rules mounted with subPath", func(b *bundle) {
			m, _ := mountFor(relay(b), "/etc/relay/rules.yaml")
			m.SubPath = "rules.yaml"
		}, checkRulesMount, "uses subPath"},
		{"rules elsewhere than the mount", func(b *bundle) {
			setEnv(b, "RELAY_RULES", "/etc/rules/rules.yaml")
		}, checkRulesMount, "no volume is mounted at /etc/rules"},
		{"a webhook secret not in the environment", func(b *bundle) {
			delete(b.secrets["relay-credentials"].StringData, "OPS_WEBHOOK_SECRET")
		}, checkRulesParse, "OPS_WEBHOOK_SECRET"},
		{"state on an emptyDir", func(b *bundle) {
			v, _ := b.volume("state")
			v.volumeSource = volumeSource{EmptyDir: &emptyDirVolumeSource{}}
		}, checkState, "is not a PersistentVolumeClaim"},
		{"a rolling update", func(b *bundle) {
			b.deploy.Spec.Strategy.Type = strategyRollingUpdate
		}, checkOneWriter, "want Recreate"},
		{"two replicas", func(b *bundle) {
			n := int32(2)
			b.deploy.Spec.Replicas = &n
		}, checkOneWriter, "want replicas: 1"},
		{"a grace no longer than relay's", func(b *bundle) {
			setEnv(b, "RELAY_SHUTDOWN_GRACE", "30s")
		}, checkGrace, "must exceed RELAY_SHUTDOWN_GRACE=30s"},
		{"a mounted token", func(b *bundle) {
			b.deploy.Spec.Template.Spec.AutomountServiceAccountToken = nil
		}, checkServiceAccount, "automountServiceAccountToken: false"},
		{"a policy that selects another pod", func(b *bundle) {
			b.policies[0].Spec.PodSelector.MatchLabels = map[string]string{"app.kubernetes.io/name": "other"}
		}, checkNetworkPolicy, "no NetworkPolicy selects the pod"},
		{"NATS on a port the policy closes", func(b *bundle) {
			setEnv(b, "RELAY_NATS_URL", "nats://nats.example.com:4443")
		}, checkNetworkPolicy, "egress 4443/TCP (NATS)"},
		{"an image running as root", func(b *bundle) {
			b.dockerfile = bytes.ReplaceAll(b.dockerfile, []byte("USER 65532:65532"), []byte("USER root"))
		}, checkDockerfile, `final stage USER "root"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := loadBundle(exampleDir)
			if err != nil {
				t.Fatal(err)
			}
			if errs := tt.check(b); len(errs) != 0 {
				t.Fatalf("the unbroken base fails: %v", errs)
			}
			tt.mutate(b)
			err = errors.Join(tt.check(b)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestDecode proves that decoding refuses what the API server or kubectl
// would refuse or silently drop, and reads multi-document files.
func TestDecode(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		kinds []string // the decoded objects' types, when no error is wanted
		err   string
	}{
		{"documents, separators and comment-only documents", `# leading comment
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
--- # the second
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b}
spec: {podSelector: {}}
---
# nothing but a comment
`, []string{"*k8s_test.configMap", "*k8s_test.networkPolicy"}, ""},
		{"an unknown field", `apiVersion: apps/v1
kind: Deployment
metadata: {name: a}
spec: {replica: 1}
`, nil, `unknown field "replica"`},
		{"a field spelled with the wrong case", `apiVersion: v1
kind: ConfigMap
metadata: {name: a}
Data: {k: v}
`, nil, `.Data: unknown field, the API spells it "data"`},
		{"a nested field spelled with the wrong case", `apiVersion: apps/v1
kind: Deployment
metadata: {name: a}
spec:
  template:
    spec:
      containers:
        - name: c
          securityContext: {readonlyRootFilesystem: true}
`, nil, `readonlyRootFilesystem: unknown field, the API spells it "readOnlyRootFilesystem"`},
		{"a duplicate key", `apiVersion: v1
kind: ConfigMap
metadata: {name: a}
data: {k: v, k: w}
`, nil, "already set"},
		{"a kind the base does not use", `apiVersion: v1
kind: Service
metadata: {name: a}
`, nil, `unexpected apiVersion "v1" kind "Service"`},
		{"a kind under the wrong apiVersion", `apiVersion: extensions/v1beta1
kind: Deployment
metadata: {name: a}
`, nil, `unexpected apiVersion "extensions/v1beta1" kind "Deployment"`},
		{"text after a separator", "apiVersion: v1\nkind: ConfigMap\n--- kind: Secret\n", nil, "line 3: text after the document separator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := decodeFile("test.yaml", []byte(tt.yaml))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, fmt.Sprintf("%T", o))
			}
			if !slices.Equal(got, tt.kinds) {
				t.Fatalf("decoded %v, want %v", got, tt.kinds)
			}
		})
	}
}

// TestChecksCatchReplicated proves that each check fails on the replicated
// overlay broken the way it guards against.
func TestChecksCatchReplicated(t *testing.T) {
	relay := func(b *bundle) *container {
		c, err := b.relay()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	setEnv := func(b *bundle, name, value string) {
		c := relay(b)
		c.Env = slices.DeleteFunc(c.Env, func(e envVar) bool { return e.Name == name })
		c.Env = append(c.Env, envVar{Name: name, Value: value})
	}
	volume := func(b *bundle, name string) *volume {
		v, ok := b.volume(name)
		if !ok {
			t.Fatalf("no volume %q", name)
		}
		return v
	}
	replicas := func(b *bundle, n int32) { b.deploy.Spec.Replicas = &n }
	intOrString := func(s string) *intOrString { v := parseIntOrString(s); return &v }
	tests := []struct {
		name   string
		mutate func(b *bundle)
		check  check
		want   string
	}{
		{"the claim left in the build", func(b *bundle) {
			b.claims["relay-state"] = &persistentVolumeClaim{}
		}, checkState, `PersistentVolumeClaim "relay-state" is in the build`},
		{"the caches on a claim", func(b *bundle) {
			volume(b, "state").volumeSource = volumeSource{PersistentVolumeClaim: &persistentVolumeClaimVolumeSource{ClaimName: "relay-state"}}
		}, checkState, `volume "state" is a PersistentVolumeClaim: with RELAY_STATE_BACKEND=jetstream`},
		{"the caches on a read-only mount", func(b *bundle) {
			m, _ := mountFor(relay(b), "/var/lib/relay/acme-solar.db")
			m.ReadOnly = true
		}, checkState, `RELAY_STATE_PATH=/var/lib/relay/relay.db: mount "state" is read-only`},
		{"one replica", func(b *bundle) { replicas(b, 1) }, checkReplicated, "replicas: 1, want at least 2"},
		{"state on one JetStream server", func(b *bundle) {
			setEnv(b, "RELAY_STATE_REPLICAS", "1")
		}, checkReplicated, "RELAY_STATE_REPLICAS=1: want at least 3"},
		{"Recreate", func(b *bundle) {
			b.deploy.Spec.Strategy = deploymentStrategy{Type: strategyRecreate}
		}, checkReplicated, `strategy "Recreate", want RollingUpdate`},
		{"two pods down in an update", func(b *bundle) {
			b.deploy.Spec.Strategy.RollingUpdate.MaxUnavailable = intOrString("2")
		}, checkReplicated, "rollingUpdate.maxUnavailable 2, want at most one pod down"},
		{"the API's default of 25% of eight replicas", func(b *bundle) {
			replicas(b, 8)
			b.deploy.Spec.Strategy.RollingUpdate = nil
		}, checkReplicated, "rollingUpdate.maxUnavailable 25%"},
		{"no PodDisruptionBudget", func(b *bundle) { b.budgets = nil }, checkReplicated, "no PodDisruptionBudget selects the pod's labels"},
		{"a budget for other pods", func(b *bundle) {
			b.budgets[0].Spec.Selector.MatchLabels = map[string]string{"app.kubernetes.io/name": "other"}
		}, checkReplicated, "no PodDisruptionBudget selects"},
		{"a budget that lets two go", func(b *bundle) {
			b.budgets[0].Spec.MaxUnavailable = intOrString("2")
		}, checkReplicated, `PodDisruptionBudget "example-app": maxUnavailable 2, want 1`},
		{"a budget of 50% unavailable", func(b *bundle) {
			b.budgets[0].Spec.MaxUnavailable = intOrString("50%")
		}, checkReplicated, "maxUnavailable 50%, want 1"},
		{"a budget keeping one available", func(b *bundle) {
			b.budgets[0].Spec.MaxUnavailable, b.budgets[0].Spec.MinAvailable = nil, intOrString("1")
		}, checkReplicated, "minAvailable 1, want 2"},
		{"no anti-affinity", func(b *bundle) {
			b.deploy.Spec.Template.Spec.Affinity = nil
		}, checkReplicated, "want a podAntiAffinity term (required or preferred) with topologyKey kubernetes.io/hostname"},
		{"anti-affinity across zones only", func(b *bundle) {
			a := b.deploy.Spec.Template.Spec.Affinity.PodAntiAffinity
			a.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey = "topology.kubernetes.io/zone"
		}, checkReplicated, "want a podAntiAffinity term"},
		{"anti-affinity to other pods", func(b *bundle) {
			a := b.deploy.Spec.Template.Spec.Affinity.PodAntiAffinity
			a.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector.MatchLabels = map[string]string{"app": "x"}
		}, checkReplicated, "want a podAntiAffinity term"},
		{"a replica id written in", func(b *bundle) {
			setEnv(b, "RELAY_REPLICA_ID", "relay-0")
		}, checkReplicated, "RELAY_REPLICA_ID comes from literal, want the pod's name"},
		{"the NATS URL in a ConfigMap", func(b *bundle) {
			b.configMaps["relay-settings"].Data["RELAY_NATS_URL"] = "nats://nats:4222"
			delete(b.secrets["relay-nats"].StringData, "RELAY_NATS_URL")
		}, checkReplicated, "RELAY_NATS_URL comes from ConfigMap relay-settings, want a Secret"},
		{"the NATS password written in", func(b *bundle) {
			setEnv(b, "RELAY_NATS_PASSWORD", "x")
		}, checkReplicated, "RELAY_NATS_PASSWORD comes from literal, want a Secret"},
		{"tenant secrets in a ConfigMap", func(b *bundle) {
			b.configMaps["leaked"] = &configMap{Data: secretData(b.secrets["relay-tenant-secrets"])}
			volume(b, "tenant-secrets").volumeSource = volumeSource{ConfigMap: &configMapVolumeSource{Name: "leaked"}}
		}, checkSecretsFromSecrets, "tenant acme-solar: app_secret_file /etc/relay-secrets/acme-solar is not in a Secret volume"},
		{"a tenant's secret missing from the Secret", func(b *bundle) {
			delete(b.secrets["relay-tenant-secrets"].StringData, "northwind-storage")
		}, checkEnvironmentLoads, "tenant northwind-storage: /etc/relay-secrets/northwind-storage: no such file"},
		{"the app credentials beside the tenants file", func(b *bundle) {
			b.secrets["relay-credentials"].StringData["RELAY_APP_SECRET"] = "x"
		}, checkEnvironmentLoads, "RELAY_APP_SECRET is set with RELAY_TENANTS_FILE: remove RELAY_APP_SECRET"},
		{"an unknown key in the tenants file", func(b *bundle) {
			cm := b.configMaps["relay-tenants"]
			cm.Data["tenants.yaml"] = strings.Replace(cm.Data["tenants.yaml"], "bootstrap:", "boot:", 1)
		}, checkEnvironmentLoads, `/etc/relay-tenants/tenants.yaml:12: tenants[1].boot: unknown key "boot"`},
		{"the tenants file mounted with subPath", func(b *bundle) {
			m, _ := mountFor(relay(b), "/etc/relay-tenants/tenants.yaml")
			m.SubPath = "tenants.yaml"
		}, checkRulesMount, `mount "tenants" uses subPath`},
		{"a tenant's rules missing from the ConfigMap", func(b *bundle) {
			delete(b.configMaps["relay-rules"].Data, "northwind-storage.yaml")
		}, checkRulesParse, `tenant northwind-storage: rules /etc/relay/northwind-storage.yaml: relay-rules has no key "northwind-storage.yaml"`},
		{"a tenant's rules that do not validate", func(b *bundle) {
			cm := b.configMaps["relay-rules"]
			cm.Data["northwind-storage.yaml"] = strings.Replace(cm.Data["northwind-storage.yaml"], "to: [bus]", "to: [buss]", 1)
		}, checkRulesParse, `relay-rules/northwind-storage.yaml:8: routes[0].to: sink "buss" is not defined`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := loadBundle(haDir)
			if err != nil {
				t.Fatal(err)
			}
			if errs := tt.check(b); len(errs) != 0 {
				t.Fatalf("the unbroken overlay fails: %v", errs)
			}
			tt.mutate(b)
			err = errors.Join(tt.check(b)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestPatch proves that patches apply as kustomize applies them: merged by
// the API's merge keys, with $patch directives and nulls, and refused when
// they name what the build does not hold or misspell a field.
func TestPatch(t *testing.T) {
	base := func(t *testing.T) *bundle {
		b, err := loadBundle(exampleDir)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	head := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: example-app\n"
	t.Run("merged by name, deleted by directive and null", func(t *testing.T) {
		b := base(t)
		err := b.patch("p.yaml", []byte(head+`spec:
  template:
    spec:
      containers:
        - name: app
          $patch: delete
        - name: relay
          env:
            - name: RELAY_LOG_LEVEL
              value: debug
      volumes:
        - name: state
          persistentVolumeClaim: null
          emptyDir: {}
`))
		if err != nil {
			t.Fatal(err)
		}
		spec := b.deploy.Spec.Template.Spec
		if len(spec.Containers) != 1 || spec.Containers[0].Name != "relay" {
			t.Fatalf("containers %v, want relay alone", spec.Containers)
		}
		env, _ := b.env(&spec.Containers[0])
		if env["RELAY_LOG_LEVEL"] != "debug" || env["RELAY_STATE_PATH"] != "/var/lib/relay/relay.db" {
			t.Fatalf("env %v: want the patch's variable added to the base's", env)
		}
		v, _ := b.volume("state")
		if v.PersistentVolumeClaim != nil || v.EmptyDir == nil {
			t.Fatalf("volume state %+v, want an emptyDir alone", v.volumeSource)
		}
		if v, _ := b.volume("rules"); v.ConfigMap == nil {
			t.Fatal("the rules volume, which the patch leaves alone, is gone")
		}
	})
	t.Run("delete", func(t *testing.T) {
		b := base(t)
		if err := b.patch("p.yaml", []byte("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: relay-state\n$patch: delete\n")); err != nil {
			t.Fatal(err)
		}
		if len(b.claims) != 0 {
			t.Fatalf("claims %v, want none", b.claims)
		}
	})
	for _, tc := range []struct{ name, patch, want string }{
		{"a misspelt field", head + "spec:\n  replica: 3\n", `unknown field "replica"`},
		{"a field with the wrong case", head + "spec:\n  template:\n    spec:\n      enableServicelinks: true\n", `the API spells it "enableServiceLinks"`},
		{"another Deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: other\nspec:\n  replicas: 3\n", `patches Deployment "other", which is not in the build`},
		{"deleting what is not there", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: other\n$patch: delete\n", `deletes Secret "other", which is not in the build`},
		{"a patch of another kind", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: relay-settings\ndata: {A: b}\n", "a patch of a ConfigMap is beyond this test"},
		{"an unknown kind", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n", `unexpected apiVersion "v1" kind "Service"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := base(t).patch("p.yaml", []byte(tc.patch))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("a patch file left out of the kustomization", func(t *testing.T) {
		b, err := loadBundle(haDir)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := b.layer(haDir)
		l.patches = slices.DeleteFunc(l.patches, func(p string) bool { return p == "pvc-delete.yaml" })
		err = errors.Join(checkResources(b)...)
		if err == nil || !strings.Contains(err.Error(), "pvc-delete.yaml is not listed in resources") {
			t.Fatalf("got %v", err)
		}
	})
}

// TestBuildMatchesKustomize builds every overlay with kustomize itself
// (kubectl kustomize, when kubectl is installed) and compares what it built
// with what this test builds: the same objects, and the same Deployment.
func TestBuildMatchesKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the build is checked by this test's own reading of the kustomizations only")
	}
	for _, dir := range overlays(t) {
		t.Run(dir, func(t *testing.T) {
			ours, err := loadBundle(dir)
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(kubectl, "kustomize", dir).Output()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v", dir, err)
			}
			objs, err := decodeFile("kubectl kustomize "+dir, out)
			if err != nil {
				t.Fatal(err)
			}
			theirs := &bundle{configMaps: map[string]*configMap{}, secrets: map[string]*secret{},
				claims: map[string]*persistentVolumeClaim{}, accounts: map[string]*serviceAccount{}}
			var got []string
			for _, o := range objs {
				obj, err := theirs.add("kustomize", o)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, obj.kind+" "+obj.name)
			}
			var want []string
			for _, l := range ours.layers {
				for _, o := range l.objects {
					if ours.has(o.kind, o.name) {
						want = append(want, o.kind+" "+o.name)
					}
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("kustomize builds\n%v\nthis test builds\n%v", got, want)
			}
			// The order of volumes is kustomize's own (what a patch adds
			// comes first) and means nothing.
			for _, d := range []*deployment{theirs.deploy, ours.deploy} {
				slices.SortFunc(d.Spec.Template.Spec.Volumes, func(a, b volume) int { return strings.Compare(a.Name, b.Name) })
			}
			a, _ := json.Marshal(theirs.deploy)
			b, _ := json.Marshal(ours.deploy)
			var am, bm any
			_ = json.Unmarshal(a, &am)
			_ = json.Unmarshal(b, &bm)
			if !reflect.DeepEqual(am, bm) {
				t.Fatalf("the Deployments differ:\nkustomize: %s\nthis test: %s", a, b)
			}
		})
	}
}

// has reports whether the build holds the object of kind and name.
func (b *bundle) has(kind, name string) bool {
	switch kind {
	case "Deployment":
		return b.deploy != nil && b.deploy.Name == name
	case "ConfigMap":
		return b.configMaps[name] != nil
	case "Secret":
		return b.secrets[name] != nil
	case "PersistentVolumeClaim":
		return b.claims[name] != nil
	case "ServiceAccount":
		return b.accounts[name] != nil
	case "NetworkPolicy":
		return slices.ContainsFunc(b.policies, func(p *networkPolicy) bool { return p.Name == name })
	case "PodDisruptionBudget":
		return slices.ContainsFunc(b.budgets, func(p *podDisruptionBudget) bool { return p.Name == name })
	}
	return false
}

// TestReadmeScalingOutCommands checks the kubectl commands of the README's
// "Scaling out" section against what this test builds: each folder they
// name is an overlay checked here, and each label selector selects the
// overlay's pods and its PodDisruptionBudget.
func TestReadmeScalingOutCommands(t *testing.T) {
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Scaling out\n")
	if !ok {
		t.Fatal(`README.md has no "## Scaling out" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	dirs := overlays(t)
	var dir string
	commands := 0
	for line := range strings.Lines(section) {
		f := strings.Fields(strings.SplitN(line, "#", 2)[0])
		if len(f) < 2 || f[0] != "kubectl" {
			continue
		}
		commands++
		for i, a := range f {
			switch {
			case strings.HasPrefix(a, "deploy/k8s/"):
				dir = strings.TrimPrefix(a, "deploy/k8s/")
				if !slices.Contains(dirs, dir) {
					t.Errorf("README: %q names %s, which is not an overlay checked here (%v)", strings.TrimSpace(line), a, dirs)
				}
			case a == "-l" && i+1 < len(f):
				if dir == "" {
					t.Fatalf("README: %q selects before any command names an overlay", strings.TrimSpace(line))
				}
				bl, err := loadBundle(dir)
				if err != nil {
					t.Fatal(err)
				}
				k, v, _ := strings.Cut(f[i+1], "=")
				sel := map[string]string{k: v}
				if !selects(sel, bl.deploy.Spec.Template.Labels) {
					t.Errorf("README: %q: %s does not select the pods of %s", strings.TrimSpace(line), f[i+1], dir)
				}
				for _, p := range bl.budgets {
					if !selects(sel, p.Labels) {
						t.Errorf("README: %q: %s does not select PodDisruptionBudget %q", strings.TrimSpace(line), f[i+1], p.Name)
					}
				}
			}
		}
	}
	if commands < 2 {
		t.Fatalf("found %d kubectl commands in the section, want the build and the apply", commands)
	}
}

// frontDoor is the repository's README, relative to this folder.
const frontDoor = "../../README.md"

// TestReadmeConsoleCommands checks the kubectl commands of the README's
// "Console" section against the example overlay, as kustomize builds it:
// the Secret they patch holds relay's variables (envFrom), the Deployment
// they restart and port-forward is the one with relay, and the port they
// forward is RELAY_LISTEN's.
func TestReadmeConsoleCommands(t *testing.T) {
	b, err := os.ReadFile(frontDoor)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Console\n")
	if !ok {
		t.Fatal(`README.md has no "## Console" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	bl, err := loadBundle(filepath.Join(overlaysDir, "example"))
	if err != nil {
		t.Fatal(err)
	}
	port, err := bl.listenPort()
	if err != nil {
		t.Fatal(err)
	}
	c, err := bl.relay()
	if err != nil {
		t.Fatal(err)
	}
	fromEnv := map[string]bool{}
	for _, e := range c.EnvFrom {
		if e.SecretRef != nil {
			fromEnv[e.SecretRef.Name] = true
		}
	}
	seen := map[string]bool{}
	for line := range strings.Lines(section) {
		f := strings.Fields(strings.SplitN(line, "#", 2)[0])
		if len(f) < 3 || f[0] != "kubectl" {
			continue
		}
		seen[f[1]] = true
		where := strings.TrimSpace(line)
		for i, a := range f {
			switch {
			case strings.HasPrefix(a, "deploy/"):
				if name := strings.TrimPrefix(a, "deploy/"); !bl.has("Deployment", name) {
					t.Errorf("README: %q: the example's Deployment is %q", where, bl.deploy.Name)
				}
			case f[1] == "patch" && a == "secret" && i+1 < len(f):
				if !bl.has("Secret", f[i+1]) || !fromEnv[f[i+1]] {
					t.Errorf("README: %q: Secret %q is not one whose keys become relay's variables", where, f[i+1])
				}
			case f[1] == "port-forward" && strings.Contains(a, ":") && i > 2:
				_, remote, _ := strings.Cut(a, ":")
				if remote != strconv.Itoa(port) {
					t.Errorf("README: %q forwards to port %s, RELAY_LISTEN's is %d", where, remote, port)
				}
			}
		}
	}
	for _, want := range []string{"patch", "port-forward"} {
		if !seen[want] {
			t.Errorf("README's Console section has no kubectl %s", want)
		}
	}
}
