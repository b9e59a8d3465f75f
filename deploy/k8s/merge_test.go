package k8s_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// deploymentLists are the list fields of a Deployment that the overlays'
// strategic-merge patches touch, each with how the API server's library
// merges it: by the merge key of the field's patchMergeKey tag in k8s.io/api
// (patchStrategy "merge"), or, for a field with no patch strategy, replaced
// whole (""). A patch that holds any other list is refused: add the field
// here, with its tags as the API declares them, before a patch uses it.
var deploymentLists = map[string]string{
	// core/v1 PodSpec.Containers: patchStrategy "merge", patchMergeKey "name".
	"spec.template.spec.containers": "name",
	// core/v1 Container.Env: patchStrategy "merge", patchMergeKey "name".
	"spec.template.spec.containers[].env": "name",
	// core/v1 Container.EnvFrom: no patch strategy.
	"spec.template.spec.containers[].envFrom": "",
	// core/v1 Container.VolumeMounts: patchStrategy "merge", patchMergeKey
	// "mountPath".
	"spec.template.spec.containers[].volumeMounts": "mountPath",
	// core/v1 PodSpec.Volumes: patchStrategy "merge,retainKeys",
	// patchMergeKey "name" (retainKeys acts only on a $retainKeys
	// directive, which patches here do not use).
	"spec.template.spec.volumes": "name",
	// core/v1 PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution:
	// no patch strategy.
	"spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution": "",
}

// The directive a patch may hold: "$patch: delete", in an element of a list
// merged by key (the element goes), in an object (it becomes empty, as the
// API's library has it) or at the top of a patch file (the object goes; see
// bundle.patch). The library's other directives ($patch: replace and merge,
// $retainKeys, $setElementOrder, $deleteFromPrimitiveList) are refused.
const (
	directiveKey = "$patch"
	deleteValue  = "delete"
)

// strategicMerge applies a strategic-merge patch to a Deployment, both as
// JSON values (decoded with UseNumber), as the API server's library
// (apimachinery's strategicpatch.StrategicMergePatch) applies one: objects
// merge key by key, a null deletes its key, scalars replace, lists of
// deploymentLists merge by their key or are replaced, and "$patch: delete"
// removes what it names. The elements of a list merged by key are in the
// library's order: those the patch names in the patch's order, the others in
// their original order, interleaved so that an element the original held
// stays ahead of a later one of the original that the patch names, and an
// element new to the list goes ahead of the original's still to place.
// original is modified.
func strategicMerge(original, patch map[string]any) (map[string]any, error) {
	if err := checkPatch("", patch); err != nil {
		return nil, err
	}
	return mergeObject("", original, patch)
}

// checkPatch refuses, anywhere in the patch value v at path at, a list that
// deploymentLists does not know and a directive other than "$patch: delete".
func checkPatch(at string, v any) error {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			switch {
			case k == directiveKey && v[k] == deleteValue:
			case k == directiveKey:
				return fmt.Errorf("%s: $patch: %v is beyond this test: only $patch: delete is applied", pathOf(at), v[k])
			case strings.HasPrefix(k, "$"):
				return fmt.Errorf("%s: the directive %s is beyond this test: only $patch: delete is applied", pathOf(at), k)
			default:
				if err := checkPatch(join(at, k), v[k]); err != nil {
					return err
				}
			}
		}
	case []any:
		if _, ok := deploymentLists[at]; !ok {
			return fmt.Errorf("%s: a list this test does not know how to merge: add it to deploymentLists with its patchMergeKey from the Kubernetes API, or \"\" if the API replaces it", at)
		}
		for _, e := range v {
			if err := checkPatch(at+"[]", e); err != nil {
				return err
			}
		}
	}
	return nil
}

// join is the path of key in the object at path at.
func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

// pathOf names path at in errors; the top is "the patch".
func pathOf(at string) string { return cmp.Or(at, "the patch") }

// mergeObject merges the patch object into original, at path at.
func mergeObject(at string, original, patch map[string]any) (map[string]any, error) {
	if _, ok := patch[directiveKey]; ok {
		// As the library has it, an object patched with $patch: delete
		// becomes empty; an element of a list goes (mergeList).
		return map[string]any{}, nil
	}
	if original == nil {
		original = map[string]any{}
	}
	for _, k := range slices.Sorted(maps.Keys(patch)) {
		p := patch[k]
		if p == nil {
			delete(original, k)
			continue
		}
		o, ok := original[k]
		om, oIsObject := o.(map[string]any)
		pm, pIsObject := p.(map[string]any)
		ol, oIsList := o.([]any)
		pl, pIsList := p.([]any)
		var err error
		switch {
		case !ok || reflect.TypeOf(o) != reflect.TypeOf(p):
			// The library takes a value the original lacks (or holds as
			// another type) as it is, without nulls and directives.
			discardNulls(p)
			if v, keep := removeDirectives(p); keep {
				original[k] = v
			} else {
				delete(original, k)
			}
		case oIsObject && pIsObject:
			original[k], err = mergeObject(join(at, k), om, pm)
		case oIsList && pIsList:
			original[k], err = mergeList(join(at, k), ol, pl)
		default:
			original[k] = p
		}
		if err != nil {
			return nil, err
		}
	}
	return original, nil
}

// mergeList merges the patch list into original, at path at, which
// checkPatch has found in deploymentLists.
func mergeList(at string, original, patch []any) ([]any, error) {
	key := deploymentLists[at]
	if key == "" {
		return patch, nil
	}
	keyOf := func(e any) (any, error) {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: an element that is not an object: %v", at, e)
		}
		switch v := m[key].(type) {
		case string, json.Number:
			return v, nil
		case nil:
			return nil, fmt.Errorf("%s: an element without its merge key %s: %v", at, key, e)
		default:
			return nil, fmt.Errorf("%s: merge key %s is %v, not a string or a number", at, key, v)
		}
	}
	index := func(list []any, k any) int {
		return slices.IndexFunc(list, func(e any) bool {
			ek, _ := keyOf(e)
			return ek == k
		})
	}
	for _, e := range original {
		if _, err := keyOf(e); err != nil {
			return nil, fmt.Errorf("the original's %w", err)
		}
	}
	var merges []map[string]any
	var mergeKeys []any
	for _, e := range patch {
		k, err := keyOf(e)
		if err != nil {
			return nil, err
		}
		m := e.(map[string]any)
		if _, ok := m[directiveKey]; ok {
			original = slices.DeleteFunc(original, func(o any) bool { ko, _ := keyOf(o); return ko == k })
			continue
		}
		merges = append(merges, m)
		mergeKeys = append(mergeKeys, k)
	}
	server := slices.Clone(original)
	merged := original
	for i, m := range merges {
		j := index(merged, mergeKeys[i])
		if j < 0 {
			merged = append(merged, m)
			continue
		}
		v, err := mergeObject(at+"[]", merged[j].(map[string]any), m)
		if err != nil {
			return nil, err
		}
		merged[j] = v
	}
	// The library's order (normalizeElementOrder): the elements the patch
	// names in the patch's order, the others in the original's, and of the
	// two next ones the original's first only when both were in the
	// original and it came first there.
	var named, others []any
	for _, e := range merged {
		k, _ := keyOf(e)
		if slices.Contains(mergeKeys, k) {
			named = append(named, e)
		} else {
			others = append(others, e)
		}
	}
	slices.SortStableFunc(named, func(a, b any) int {
		ka, _ := keyOf(a)
		kb, _ := keyOf(b)
		return slices.Index(mergeKeys, ka) - slices.Index(mergeKeys, kb)
	})
	out := make([]any, 0, len(merged))
	for len(named) > 0 || len(others) > 0 {
		takeOther := len(named) == 0
		if len(named) > 0 && len(others) > 0 {
			ko, _ := keyOf(others[0])
			kn, _ := keyOf(named[0])
			io, in := index(server, ko), index(server, kn)
			takeOther = io >= 0 && in >= 0 && io < in
		}
		if takeOther {
			out, others = append(out, others[0]), others[1:]
		} else {
			out, named = append(out, named[0]), named[1:]
		}
	}
	return out, nil
}

// discardNulls deletes every null member of the objects in v, as the
// library does to a value it takes whole.
func discardNulls(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
			} else {
				discardNulls(e)
			}
		}
	case []any:
		for _, e := range v {
			discardNulls(e)
		}
	}
}

// removeDirectives drops from v every object that holds a directive, as the
// library does to a value it takes whole, and reports whether v itself is
// kept.
func removeDirectives(v any) (any, bool) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v[directiveKey]; ok {
			return nil, false
		}
		for k, e := range v {
			if kept, keep := removeDirectives(e); keep {
				v[k] = kept
			} else {
				delete(v, k)
			}
		}
		return v, true
	case []any:
		out := []any{}
		for _, e := range v {
			if kept, keep := removeDirectives(e); keep {
				out = append(out, kept)
			}
		}
		return out, true
	}
	return v, true
}

// jsonObject decodes a JSON object as strategicMerge takes it, numbers as
// json.Number.
func jsonObject(js []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not an object")
	}
	return m, nil
}

// TestStrategicMerge proves that strategicMerge merges as the API server's
// library does the patch shapes the overlays use, and refuses the shapes it
// does not know.
func TestStrategicMerge(t *testing.T) {
	original := `
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: app
          image: pause
        - name: relay
          image: relay
          securityContext: {privileged: false}
          envFrom:
            - configMapRef: {name: a}
          env:
            - {name: A, value: "1"}
            - {name: B, value: "2"}
          volumeMounts:
            - {name: rules, mountPath: /etc/relay}
      volumes:
        - name: rules
          configMap: {name: rules}
        - name: state
          persistentVolumeClaim: {claimName: state}
`
	for _, tc := range []struct {
		name, patch, want, err string
	}{
		{name: "env merged by name, a scalar replaced, a container deleted", patch: `
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: app
          $patch: delete
        - name: relay
          env:
            - {name: B, value: "3"}
            - {name: C, value: "4"}
`, want: `
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: relay
          image: relay
          securityContext: {privileged: false}
          envFrom:
            - configMapRef: {name: a}
          env:
            - {name: A, value: "1"}
            - {name: B, value: "3"}
            - {name: C, value: "4"}
          volumeMounts:
            - {name: rules, mountPath: /etc/relay}
      volumes:
        - name: rules
          configMap: {name: rules}
        - name: state
          persistentVolumeClaim: {claimName: state}
`},
		{name: "new elements ahead of the originals, by merge key, lists without one replaced, a null and a delete", patch: `
spec:
  template:
    spec:
      containers:
        - name: relay
          securityContext: {$patch: delete}
          envFrom:
            - secretRef: {name: b}
          env:
            - {name: D, value: "5"}
          volumeMounts:
            - {name: tenants, mountPath: /etc/tenants}
            - {name: renamed, mountPath: /etc/relay}
      volumes:
        - name: state
          persistentVolumeClaim: null
          emptyDir: {}
        - name: tenants
          configMap: {name: tenants, optional: null}
`, want: `
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: app
          image: pause
        - name: relay
          image: relay
          securityContext: {}
          envFrom:
            - secretRef: {name: b}
          env:
            - {name: D, value: "5"}
            - {name: A, value: "1"}
            - {name: B, value: "2"}
          volumeMounts:
            - {name: tenants, mountPath: /etc/tenants}
            - {name: renamed, mountPath: /etc/relay}
      volumes:
        - name: rules
          configMap: {name: rules}
        - name: state
          emptyDir: {}
        - name: tenants
          configMap: {name: tenants, optional: null}
`},
		{name: "a value the original lacks, without its nulls and directives", patch: `
spec:
  template:
    spec:
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm: {topologyKey: h, labelSelector: null}
            - $patch: delete
`, want: `
spec:
  replicas: 1
  template:
    spec:
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm: {topologyKey: h}
      containers:
        - name: app
          image: pause
        - name: relay
          image: relay
          securityContext: {privileged: false}
          envFrom:
            - configMapRef: {name: a}
          env:
            - {name: A, value: "1"}
            - {name: B, value: "2"}
          volumeMounts:
            - {name: rules, mountPath: /etc/relay}
      volumes:
        - name: rules
          configMap: {name: rules}
        - name: state
          persistentVolumeClaim: {claimName: state}
`},
		{name: "a list the table does not know", patch: `
spec: {template: {spec: {containers: [{name: relay, args: [run, --debug]}]}}}
`, err: `spec.template.spec.containers[].args: a list this test does not know how to merge`},
		{name: "a list the table does not know, where the original has none", patch: `
spec: {template: {spec: {initContainers: [{name: init}]}}}
`, err: `spec.template.spec.initContainers: a list this test does not know how to merge`},
		{name: "an element without its merge key", patch: `
spec: {template: {spec: {containers: [{name: relay, env: [{value: x}]}]}}}
`, err: `spec.template.spec.containers[].env: an element without its merge key name`},
		{name: "a directive other than delete", patch: `
spec: {template: {spec: {containers: [{name: relay, $patch: replace}]}}}
`, err: `spec.template.spec.containers[]: $patch: replace is beyond this test`},
		{name: "another directive", patch: `
spec: {template: {spec: {$retainKeys: [containers]}}}
`, err: `spec.template.spec: the directive $retainKeys is beyond this test`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := strategicMerge(yamlObject(t, original), yamlObject(t, tc.patch))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := yamlObject(t, tc.want); !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Fatalf("merged\n%s\nwant\n%s", g, w)
			}
		})
	}
}

// yamlObject decodes a YAML object as strategicMerge takes it.
func yamlObject(t *testing.T, y string) map[string]any {
	t.Helper()
	js, err := yamlToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	m, err := jsonObject(js)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
